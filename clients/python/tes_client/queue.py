"""Where a queued execution stands in its category's line (``progress.queuePosition`` and
``progress.estimatedStartAt``), as :func:`queue_place` reads it and :func:`describe_queue_place`
words it. The same reading and words as the TypeScript SDK's ``queuePlace``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Optional

# RFC 3339 as the server writes it; datetime.fromisoformat() of Python 3.9 takes neither "Z"
# nor a fraction of other than 3 or 6 digits, so the parts are read here.
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


@dataclass(frozen=True)
class QueuePlace:
    #: 1 is the next to start: the queued executions of its category the fair order starts before it, plus one.
    position: int
    #: The server's estimate of its start (on the server's clock, timezone-aware); None when it gives none.
    estimated_start_at: Optional[datetime]

    def __str__(self) -> str:
        return describe_queue_place(self)


def _parse_time(value: Any) -> Optional[datetime]:
    m = _RFC3339.match(value) if isinstance(value, str) else None
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, z, sign, off_h, off_m = m.groups()
    offset = timedelta(0) if z else timedelta(hours=int(off_h), minutes=int(off_m)) * (1 if sign == "+" else -1)
    try:
        return datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((fraction or "0")[:6].ljust(6, "0")),
            tzinfo=timezone(offset),
        )
    except ValueError:  # 2026-02-30 and the like
        return None


def queue_place(execution: Mapping[str, Any]) -> Optional[QueuePlace]:
    """The execution's place in line while it is ``queued``, else None: after it started there is
    nothing to show, and a server older than the fair-share order reports no place at all. A value
    the contract does not allow (a position below 1 or not whole, a time that does not parse)
    counts as absent: "position 0" would mislead more than nothing."""
    if execution.get("status") != "queued":
        return None
    progress = execution.get("progress") or {}
    position = progress.get("queuePosition")
    # bool is an int in Python; True is no position.
    if not isinstance(position, int) or isinstance(position, bool) or position < 1:
        return None
    return QueuePlace(position, _parse_time(progress.get("estimatedStartAt")))


def describe_queue_place(place: QueuePlace, now: Optional[datetime] = None) -> str:
    """``"position 3 in line, est. start in ~12 s"``, ``"next in line"``, … The estimate is counted
    from ``now`` (default: this machine's clock, so a clock that is off shifts it by as much); one
    that is due or past reads "any moment", since the execution is still waiting."""
    where = "next in line" if place.position == 1 else f"position {place.position} in line"
    if place.estimated_start_at is None:
        return where
    now = now or datetime.now(timezone.utc)
    return f"{where}, est. start {_starts_in((place.estimated_start_at - now).total_seconds())}"


def _starts_in(seconds: float) -> str:
    """"in ~12 s" up to 89 s, "in ~4 min" up to 89 min, then hours: an estimate, so whole units.
    Halves round up, as JavaScript's Math.round does, so both SDKs say the same."""
    if seconds < 0.5:
        return "any moment"
    whole = int(seconds + 0.5)
    if whole < 90:
        return f"in ~{whole} s"
    minutes = int(whole / 60 + 0.5)
    return f"in ~{minutes} min" if minutes < 90 else f"in ~{int(minutes / 60 + 0.5)} h"
