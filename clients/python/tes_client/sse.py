"""An incremental ``text/event-stream`` parser (the TypeScript SDK's SseParser, in Python)."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import List, Optional, Union

_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class SseEvent:
    """One dispatched Server-Sent Event."""

    #: The ``event:`` field, ``message`` when there was none.
    type: str
    #: The ``data:`` lines joined with "\\n".
    data: str
    #: The last ``id:`` seen on the stream so far (it persists across events, as the spec says).
    last_event_id: str


class SseParser:
    """Follows the HTML standard's "interpreting an event stream": bytes are decoded as UTF-8
    (a leading BOM dropped); lines end in CRLF, LF or CR; a line starting with ":" is a
    comment; a field's value loses one leading space; ``data:`` lines are joined with "\\n";
    an empty line dispatches the event, and an event with no data is not dispatched; an
    ``id:`` containing NUL is ignored; ``retry:`` counts only when it is all ASCII digits.

    Chunks may be cut anywhere (inside a multi-byte character, between the CR and the LF of
    one line ending): the decoder, the unfinished line and a trailing CR carry over to the next
    push(). An event cut off by the end of the stream is not an event.
    """

    def __init__(self) -> None:
        #: The last valid ``retry:`` value in milliseconds, if the server sent one.
        self.retry_ms: Optional[int] = None
        #: Comment lines seen (keep-alives among them).
        self.comments = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._line = ""
        self._after_cr = False
        self._bom_checked = False
        self._data: List[str] = []
        self._type = ""
        self._last_event_id = ""

    def push(self, chunk: Union[bytes, str]) -> List[SseEvent]:
        """Feeds bytes (or already decoded text); returns the events they completed, in order."""
        text = chunk if isinstance(chunk, str) else self._decoder.decode(chunk)
        if not self._bom_checked and text:
            self._bom_checked = True
            if text[0] == "\ufeff":
                text = text[1:]
        events: List[SseEvent] = []
        start = 0
        for i, c in enumerate(text):
            if c != "\n" and c != "\r":
                continue
            # The LF of a CRLF whose CR ended the previous chunk (or line) ends nothing.
            if c == "\n" and self._after_cr and i == start and self._line == "":
                self._after_cr = False
                start = i + 1
                continue
            self._after_cr = c == "\r"
            line = self._line + text[start:i]
            self._line = ""
            start = i + 1
            event = self._process_line(line)
            if event is not None:
                events.append(event)
        if start < len(text):
            self._line += text[start:]
            self._after_cr = False
        return events

    def end(self) -> None:
        """The stream ended: whatever was not dispatched by an empty line is dropped."""
        self._line = ""
        self._data = []
        self._type = ""
        self._after_cr = False

    def _process_line(self, line: str) -> Optional[SseEvent]:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        colon = line.find(":")
        field = line if colon == -1 else line[:colon]
        value = "" if colon == -1 else line[colon + 1 :]
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            if "\0" not in value:
                self._last_event_id = value
        elif field == "retry":
            if _DIGITS.fullmatch(value):
                self.retry_ms = int(value)
        return None

    def _dispatch(self) -> Optional[SseEvent]:
        data, kind = self._data, self._type
        self._data = []
        self._type = ""
        if not data:
            return None
        return SseEvent(type=kind or "message", data="\n".join(data), last_event_id=self._last_event_id)
