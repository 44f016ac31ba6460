"""``GET /tools/executions/{id}/events``: an execution's changes as they happen."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.parse
from typing import Any, Callable, Generator, Iterator, Optional, cast

from ._http import NETWORK_ERRORS, NO_DEADLINE, Deadline, StreamResponse, Transport, backoff_seconds, sleep
from .errors import (
    RateLimitedError,
    StreamUnavailableError,
    TesAbortError,
    TesApiError,
    TesError,
    TesNetworkError,
)
from .sse import SseParser
from .types import Execution

#: The statuses after which the gateway ends a stream. Not needs_review: an operator may still
#: resolve it, and the stream stays open for that change (run() stops at it all the same).
STREAM_END = ("succeeded", "failed", "cancelled")
#: A server's ``retry:`` is honoured up to this.
_MAX_RECONNECT_SECONDS = 60.0
#: No byte for this long (the gateway sends ``: keep-alive`` every 15 s) means a dead connection.
DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS = 45.0
_EVENT_STREAM = re.compile(r"text/event-stream\b", re.IGNORECASE)


class ExecutionEvents:
    """The stream as an iterator of executions, each exactly as GET returns it, one per change,
    ending after the one with a terminal status (succeeded, failed, cancelled). Iterate it once;
    ``close()`` (or leaving a ``with`` block) closes the connection.

    A connection that drops, ends early, goes silent for ``idle_timeout_seconds`` or answers 5xx
    is resumed with ``Last-Event-ID``, after the server's ``retry:`` delay or the client's
    backoff, whichever is longer, so no change is missed or repeated across gateway restarts;
    ``retry.max_reconnects`` consecutive failures end it with TesNetworkError. A ``429
    rate_limit_exceeded`` is waited out as every request's is. Any other 4xx is raised as its
    TesApiError; an answer that is not ``text/event-stream`` is a StreamUnavailableError.
    """

    def __init__(
        self,
        transport: Transport,
        get_execution: Callable[[str, Deadline], Execution],
        execution_id: str,
        *,
        last_event_id: Optional[str] = None,
        idle_timeout_seconds: float = DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS,
        deadline: Deadline = NO_DEADLINE,
        first_event_timeout_seconds: Optional[float] = None,
    ) -> None:
        self.execution_id = execution_id
        #: The id of the last event received: pass it as ``last_event_id`` to resume elsewhere.
        self.last_event_id = last_event_id
        self._transport = transport
        self._get_execution = get_execution
        self._idle = idle_timeout_seconds
        self._deadline = deadline
        self._first_event_timeout = first_event_timeout_seconds
        self._first_event_at = (
            None if first_event_timeout_seconds is None else time.monotonic() + first_event_timeout_seconds
        )
        self._got_event = False
        self._generator: Optional[Generator[Execution, None, None]] = None

    def __iter__(self) -> Iterator[Execution]:
        if self._generator is not None:
            raise TypeError("events() is iterated once: call it again, with this last_event_id, to follow again")
        self._generator = self._follow()
        return self._generator

    def close(self) -> None:
        """Closes the connection, if one is open; the iteration ends."""
        if self._generator is not None:
            self._generator.close()

    def __enter__(self) -> ExecutionEvents:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _read_timeout(self) -> float:
        timeout = self._idle
        if not self._got_event and self._first_event_at is not None:
            timeout = min(timeout, max(0.001, self._first_event_at - time.monotonic()))
        return self._deadline.cap(timeout)

    def _check_time(self) -> None:
        """Raises when a caller's limit, not the connection, is why nothing came."""
        if not self._got_event and self._first_event_at is not None and time.monotonic() >= self._first_event_at:
            raise StreamUnavailableError(
                f"no event within {self._first_event_timeout} s: something between here and the gateway holds the stream back"
            )
        self._deadline.check()

    def _follow(self) -> Generator[Execution, None, None]:
        retry = self._transport.retry
        path = f"/tools/executions/{urllib.parse.quote(self.execution_id, safe='')}/events"
        failures = 0
        rate_limit_waits = 0
        # The server's ``retry:`` (the gateway says 1000 ms): the least wait before a reconnect.
        reconnect = 0.0
        last_error: Optional[BaseException] = None
        while True:
            self._check_time()
            resumed = self.last_event_id is not None
            delivered = 0
            wait: Optional[float] = None
            stream: Optional[StreamResponse] = None
            try:
                headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id is not None else {}
                stream = self._transport.open(path, headers=headers, timeout=self._read_timeout())
                kind = stream.headers.get("content-type") or ""
                if not _EVENT_STREAM.match(kind):
                    raise StreamUnavailableError(
                        f"{path}: HTTP {stream.status} with Content-Type {json.dumps(kind)}, not text/event-stream"
                    )
                parser = SseParser()
                while True:
                    stream.set_timeout(self._read_timeout())
                    try:
                        chunk = stream.read1()
                    except socket.timeout:
                        self._check_time()
                        raise TesNetworkError(f"{path}: nothing received for {self._idle} s") from None
                    if not chunk:
                        break
                    for event in parser.push(chunk):
                        if event.type != "execution":
                            continue
                        execution = _parse_execution(event.data, path)
                        if event.last_event_id != "":
                            self.last_event_id = event.last_event_id
                        delivered += 1
                        failures = 0
                        rate_limit_waits = 0
                        self._got_event = True
                        yield execution
                        if execution["status"] in STREAM_END:
                            return
                    if parser.retry_ms is not None:
                        reconnect = min(parser.retry_ms / 1000, _MAX_RECONNECT_SECONDS)
                # The server ended the stream before the terminal event: a gateway that stops
                # does that. So does one asked to resume after the terminal event (nothing more
                # to say), which looks the same on the wire: look.
                if delivered == 0 and resumed:
                    now = self._get_execution(self.execution_id, self._deadline)
                    if now["status"] in STREAM_END:
                        self._got_event = True
                        yield now
                        return
                last_error = TesNetworkError(f"{path}: the stream ended before the execution did")
            except (StreamUnavailableError, TesAbortError):
                raise
            except RateLimitedError as err:
                seconds = float(err.retry_after_seconds if err.retry_after_seconds is not None else 1)
                if rate_limit_waits >= retry.rate_limit_retries or seconds > retry.max_rate_limit_wait_seconds:
                    raise
                rate_limit_waits += 1
                wait = seconds
                last_error = err
            except TesApiError as err:
                if not err.retryable:
                    raise
                last_error = err
            except TesNetworkError as err:
                self._check_time()
                last_error = err
            except TesError:
                raise
            except NETWORK_ERRORS as err:
                self._check_time()
                last_error = err
            finally:
                if stream is not None:
                    stream.close()
            if delivered == 0 and wait is None:
                failures += 1
            if failures >= retry.max_reconnects:
                raise TesNetworkError(f"{path}: no event after {failures} connections ({last_error})")
            sleep(wait if wait is not None else max(reconnect, backoff_seconds(max(1, failures), retry)), self._deadline)


def _parse_execution(data: str, path: str) -> Execution:
    try:
        value = json.loads(data)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not isinstance(value.get("status"), str):
        raise TesError("invalid_response", f"{path}: an execution event whose data is not an execution")
    return cast(Execution, value)
