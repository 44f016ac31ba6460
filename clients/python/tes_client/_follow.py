"""How run() and wait() learn that an execution ended (the TypeScript SDK's follow.ts):

- ``stream``: ``GET …/events``, every change as it happens (raises if the stream is unusable);
- ``wait``: ``GET …`` with ``Prefer: wait=30`` in a loop, one answer per 30 s at most;
- ``poll``: ``GET …`` every ``poll_interval_seconds`` or the server's Retry-After, whichever is longer;
- ``auto`` (default): the stream; if it is unusable, wait; if the server ignores the wait, poll.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Tuple

from ._http import Deadline, sleep
from .errors import StreamUnavailableError, TesApiError, TesNetworkError
from .events import ExecutionEvents
from .types import Execution, is_final

RUN_STRATEGIES = ("auto", "stream", "wait", "poll")
#: Seconds each ``Prefer: wait`` asks for: under the gateway's 60 s cap and common proxies' idle timeouts.
WAIT_SECONDS = 30
#: The gateway sends the first event at once; none within this means something holds the stream back.
DEFAULT_FIRST_EVENT_TIMEOUT_SECONDS = 5.0
#: Unfinished answers to ``Prefer: wait`` that came at once without Preference-Applied, in a
#: row, before ``auto`` stops asking.
_IGNORED_WAITS_BEFORE_POLLING = 3

ProgressCallback = Callable[[Execution], None]


@dataclass(frozen=True)
class PollResult:
    execution: Execution
    retry_after_seconds: Optional[int]
    #: The answer carried Preference-Applied: the server waited and the execution ended.
    preference_applied: bool


class FollowClient(Protocol):
    poll_interval_seconds: float

    def poll(self, execution_id: str, *, wait_seconds: Optional[int] = None, deadline: Deadline = ...) -> PollResult: ...

    def _events(
        self, execution_id: str, *, deadline: Deadline, first_event_timeout_seconds: Optional[float]
    ) -> ExecutionEvents: ...


@dataclass(frozen=True)
class FollowOptions:
    strategy: str
    deadline: Deadline
    on_progress: Optional[ProgressCallback]
    first_event_timeout_seconds: float
    #: The submit answer's Retry-After (a 202 says 5 s): the first poll waits at least this.
    retry_after_seconds: Optional[int]


def check_strategy(strategy: str) -> None:
    if strategy not in RUN_STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(RUN_STRATEGIES)}, got {strategy!r}")


def follow_execution(client: FollowClient, accepted: Execution, o: FollowOptions) -> Execution:
    """Follows an accepted execution with the chosen strategy until its status is final."""
    check_strategy(o.strategy)
    if is_final(accepted["status"]):
        return accepted
    if o.strategy == "poll":
        return _follow_poll(client, accepted, o, o.retry_after_seconds)
    if o.strategy == "wait":
        return _follow_wait(client, accepted, o, may_fall_back=False)
    execution, final = _follow_stream(client, accepted, o, required=o.strategy == "stream")
    # Not final only when the stream was unusable and the strategy lets us wait instead.
    return execution if final else _follow_wait(client, execution, o, may_fall_back=True)


def _follow_stream(client: FollowClient, accepted: Execution, o: FollowOptions, required: bool) -> Tuple[Execution, bool]:
    """The event stream until a final status. Unusable (no first event in time, a 404/405/406,
    not text/event-stream, or lost for good after its reconnects) means ``(latest, False)``
    unless ``required``, then it raises."""
    latest = accepted
    stream = client._events(
        accepted["id"], deadline=o.deadline, first_event_timeout_seconds=o.first_event_timeout_seconds
    )
    try:
        for execution in stream:
            latest = execution
            if o.on_progress is not None:
                o.on_progress(execution)
            if is_final(execution["status"]):
                return execution, True
    except (StreamUnavailableError, TesNetworkError, TesApiError) as err:
        if required or not _stream_unusable(err):
            raise
    finally:
        stream.close()
    return latest, False


def _stream_unusable(err: Exception) -> bool:
    if isinstance(err, TesApiError):
        return err.status in (404, 405, 406)
    return isinstance(err, (StreamUnavailableError, TesNetworkError))


def _follow_wait(client: FollowClient, start: Execution, o: FollowOptions, may_fall_back: bool) -> Execution:
    """GET with ``Prefer: wait`` until a final status. A server that honours it answers when the
    execution ends or after the wait; one that ignores it answers at once. Answers that came at
    once are paced like polls, and with ``may_fall_back`` a few in a row switch to polling."""
    execution = start
    ignored = 0
    while not is_final(execution["status"]):
        started = time.monotonic()
        answer = client.poll(execution["id"], wait_seconds=WAIT_SECONDS, deadline=o.deadline)
        execution = answer.execution
        if o.on_progress is not None:
            o.on_progress(execution)
        if is_final(execution["status"]):
            break
        if answer.preference_applied or time.monotonic() - started >= WAIT_SECONDS / 2:
            ignored = 0
            continue
        ignored += 1
        if may_fall_back and ignored >= _IGNORED_WAITS_BEFORE_POLLING:
            return _follow_poll(client, execution, o, answer.retry_after_seconds)
        sleep(_poll_delay(client, answer.retry_after_seconds), o.deadline)
    return execution


def _follow_poll(client: FollowClient, start: Execution, o: FollowOptions, retry_after: Optional[int]) -> Execution:
    """Plain polling, never more often than poll_interval_seconds (5 s by default) or the Retry-After."""
    execution = start
    while not is_final(execution["status"]):
        sleep(_poll_delay(client, retry_after), o.deadline)
        answer = client.poll(execution["id"], deadline=o.deadline)
        execution, retry_after = answer.execution, answer.retry_after_seconds
        if o.on_progress is not None:
            o.on_progress(execution)
    return execution


def _poll_delay(client: FollowClient, retry_after: Optional[int]) -> float:
    return max(client.poll_interval_seconds, float(retry_after or 0))
