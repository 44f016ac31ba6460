"""TesClient: every endpoint of the Tool Execution Service, and run() for the whole paid flow."""

from __future__ import annotations

import base64
import io
import os
import platform
import tempfile
import urllib.parse
from typing import IO, Iterator, Optional, Union, cast

from ._download import fetch_artifact
from ._follow import (
    DEFAULT_FIRST_EVENT_TIMEOUT_SECONDS,
    WAIT_SECONDS,
    FollowOptions,
    PollResult,
    ProgressCallback,
    check_strategy,
    follow_execution,
)
from ._http import NO_DEADLINE, Deadline, RetryOptions, Transport
from .errors import ExecutionUnsuccessfulError, QuoteAboveMaximumError, TesError, mark_submit_error, parse_retry_after
from .events import DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS, ExecutionEvents
from .idempotency import is_valid_idempotency_key, new_idempotency_key
from .media import detect_mime_type
from .results import PathLike, RunArtifact, RunResult, SubmitResult
from .types import (
    Artifact,
    Catalog,
    Download,
    Execution,
    ExecutionList,
    Project,
    Quote,
    ToolArguments,
    UploadedFile,
    Usage,
)

CLIENT_VERSION = "0.1.0"
DEFAULT_BASE_URL = "http://127.0.0.1:8080"
#: docs/api.md#limits: poll an execution no more often than every 5 seconds.
DEFAULT_POLL_INTERVAL_SECONDS = 5.0


def _check_micros(name: str, value: object) -> int:
    # bool is an int in Python, and a float is not an amount of micros.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{name} must be a non-negative int of micro-USD, got {value!r}")
    return value


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class TesClient:
    """Client of the Tool Execution Service API. Every method maps one endpoint; run() is the
    whole paid flow (quote, submit with an idempotency key, resend safely, follow, artifacts).
    Errors are TesError subclasses (errors.py) with a stable ``code``.

    Safe to share between threads: it keeps no mutable state, and each request opens its own
    connection (no pool: a client of a paid, asynchronous API sends few requests).
    """

    def __init__(
        self,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        *,
        poll_interval_seconds: float = DEFAULT_POLL_INTERVAL_SECONDS,
        retry: Optional[RetryOptions] = None,
    ) -> None:
        if not isinstance(api_key, str) or api_key.strip() == "":
            raise ValueError("TesClient: api_key is required")
        base = base_url.rstrip("/")
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("TesClient: base_url must be an http(s) URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("TesClient: base_url must carry no credentials or query")
        #: The base URL requests go to, without a trailing slash.
        self.base_url = base
        #: Least time between two polls of an execution; a longer Retry-After wins.
        self.poll_interval_seconds = poll_interval_seconds
        self.retry = retry or RetryOptions()
        self._http = Transport(
            api_key=api_key,
            base_url=base,
            retry=self.retry,
            user_agent=f"tes-client-python/{CLIENT_VERSION} python/{platform.python_version()}",
        )

    def __repr__(self) -> str:  # never the key
        return f"TesClient(base_url={self.base_url!r})"

    # --- one method per endpoint -------------------------------------------------------------

    def tools(self) -> Catalog:
        """GET /tools: the catalog with the current priceVersion."""
        return cast(Catalog, self._http.request("GET", "/tools").body["data"])

    def quote(self, tool: str, arguments: ToolArguments) -> Quote:
        """POST /tools/quote: free; the maximum that a submit would reserve."""
        body = {"tool": tool, "arguments": arguments}
        return cast(Quote, self._http.request("POST", "/tools/quote", body=body).body["data"])

    def upload(self, source: Union[bytes, bytearray, memoryview, PathLike], mime_type: Optional[str] = None) -> UploadedFile:
        """POST /tools/upload (docs/api.md#upload-post-toolsupload: the bytes in Base64 JSON). ``source`` is the bytes
        or a file path; the MIME type is detected from the bytes (or the file name) when not
        given. Identical content gives the same file id, which is why a resend is safe."""
        name: Optional[str] = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
        else:
            name = os.fspath(source)
            with open(name, "rb") as f:
                data = f.read()
        kind = mime_type or detect_mime_type(data, name)
        if kind is None:
            raise TesError(
                "unsupported_media_type",
                "cannot tell the MIME type of the upload: pass mime_type "
                "(image/png, image/jpeg, audio/wav, audio/mpeg, video/mp4)",
            )
        body = {"mimeType": kind, "data": base64.b64encode(data).decode("ascii")}
        return cast(UploadedFile, self._http.request("POST", "/tools/upload", body=body).body["data"])

    def submit(
        self,
        tool: str,
        arguments: ToolArguments,
        *,
        price_version: str,
        maximum_charge_micros: int,
        idempotency_key: str,
        wait_seconds: Optional[int] = None,
    ) -> SubmitResult:
        """POST /tools/{tool}: reserves the quoted maximum. Lost connections and 5xx are resent
        with the same key and body (the gateway replays the original execution); the money
        429s are raised at once. ``wait_seconds`` (1-60) sends ``Prefer: wait``. A TesError
        raised carries the key (``idempotency_key``) and ``may_have_been_accepted``: when true,
        submit again with the same key, never a new one."""
        if not is_valid_idempotency_key(idempotency_key):
            raise ValueError('idempotency_key must be 8-128 of letters, digits, ".", "_", ":" or "-"')
        body = {
            "tool": tool,
            "arguments": arguments,
            "priceVersion": price_version,
            "maximumChargeMicros": _check_micros("maximum_charge_micros", maximum_charge_micros),
        }
        try:
            res = self._http.request(
                "POST",
                f"/tools/{_segment(tool)}",
                body=body,
                headers={"Idempotency-Key": idempotency_key},
                wait_seconds=wait_seconds,
            )
        except TesError as err:
            mark_submit_error(err, idempotency_key)
            raise
        return SubmitResult(
            execution=cast(Execution, res.body["data"]),
            replayed=res.headers.get("idempotent-replayed") == "true",
            retry_after_seconds=parse_retry_after(res.headers.get("retry-after")),
            preference_applied=res.headers.get("preference-applied") is not None,
        )

    def execution(self, execution_id: str) -> Execution:
        """GET /tools/executions/{id}."""
        return self.poll(execution_id).execution

    def poll(self, execution_id: str, *, wait_seconds: Optional[int] = None, deadline: Deadline = NO_DEADLINE) -> PollResult:
        """GET /tools/executions/{id} with the Retry-After the gateway may ask for; with
        ``wait_seconds``, ``Prefer: wait=N``, and whether the gateway said it waited for the end."""
        res = self._http.request(
            "GET", f"/tools/executions/{_segment(execution_id)}", wait_seconds=wait_seconds, deadline=deadline
        )
        return PollResult(
            execution=cast(Execution, res.body["data"]),
            retry_after_seconds=parse_retry_after(res.headers.get("retry-after")),
            preference_applied=res.headers.get("preference-applied") is not None,
        )

    def events(
        self,
        execution_id: str,
        *,
        last_event_id: Optional[str] = None,
        idle_timeout_seconds: float = DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS,
    ) -> ExecutionEvents:
        """GET /tools/executions/{id}/events: the execution after every change, as it happens,
        until it ends; resumed with Last-Event-ID after a lost connection::

            with tes.events(execution_id) as stream:
                for e in stream:
                    print(e["status"], e["progress"]["completedSteps"])
        """
        return ExecutionEvents(
            self._http,
            lambda i, d: self.poll(i, deadline=d).execution,
            execution_id,
            last_event_id=last_event_id,
            idle_timeout_seconds=idle_timeout_seconds,
        )

    def _events(self, execution_id: str, *, deadline: Deadline, first_event_timeout_seconds: Optional[float]) -> ExecutionEvents:
        return ExecutionEvents(
            self._http,
            lambda i, d: self.poll(i, deadline=d).execution,
            execution_id,
            deadline=deadline,
            first_event_timeout_seconds=first_event_timeout_seconds,
        )

    def executions(
        self,
        *,
        status: Optional[str] = None,
        tool: Optional[str] = None,
        limit: Optional[int] = None,
        before: Optional[str] = None,
    ) -> ExecutionList:
        """GET /tools/executions: newest first; pass ``nextBefore`` as ``before`` for the next page."""
        query = {k: v for k, v in (("limit", limit), ("before", before), ("status", status), ("tool", tool)) if v is not None}
        qs = urllib.parse.urlencode(query)
        return cast(ExecutionList, self._http.request("GET", f"/tools/executions{'?' + qs if qs else ''}").body)

    def iter_executions(
        self, *, status: Optional[str] = None, tool: Optional[str] = None, page_size: Optional[int] = None
    ) -> Iterator[Execution]:
        """Every execution matching the filters, newest first, fetching page after page."""
        before: Optional[str] = None
        while True:
            page = self.executions(status=status, tool=tool, limit=page_size, before=before)
            yield from page["data"]
            if not page["hasMore"] or page["nextBefore"] is None:
                return
            before = page["nextBefore"]

    def cancel(self, execution_id: str) -> Execution:
        """POST /tools/executions/{id}/cancel: queued ends at once; running gets cancelRequested."""
        res = self._http.request("POST", f"/tools/executions/{_segment(execution_id)}/cancel")
        return cast(Execution, res.body["data"])

    def download_url(self, execution_id: str, artifact_id: str) -> Download:
        """A presigned URL (≤ 300 s) for one artifact. The URL is private data: do not log it."""
        path = f"/tools/executions/{_segment(execution_id)}/artifacts/{_segment(artifact_id)}/download"
        return cast(Download, self._http.request("GET", path).body["data"])

    def download(self, execution_id: str, artifact_id: str) -> bytes:
        """The bytes of one artifact, checked against its size and sha256."""
        sink = io.BytesIO()
        self._download(execution_id, artifact_id, sink)
        return sink.getvalue()

    def download_to(self, execution_id: str, artifact_id: str, path: PathLike) -> str:
        """Streams one artifact to ``path`` (through a temporary file beside it, renamed only
        once its size and sha256 check out, so ``path`` never holds a partial or wrong file)."""
        target = os.path.abspath(os.fspath(path))
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=f".{os.path.basename(target)}.", suffix=".part")
        try:
            with os.fdopen(fd, "w+b") as sink:
                self._download(execution_id, artifact_id, sink)
            os.replace(temp, target)
        except BaseException:
            if os.path.exists(temp):
                os.unlink(temp)
            raise
        return target

    def _download(self, execution_id: str, artifact_id: str, sink: IO[bytes]) -> None:
        fetch_artifact(lambda: self.download_url(execution_id, artifact_id), artifact_id, sink, self.retry, self._http.user_agent)

    def project(self) -> Project:
        """GET /tools/project: organization, project, key, balance and cap of this key."""
        return cast(Project, self._http.request("GET", "/tools/project").body["data"])

    def usage(self) -> Usage:
        """GET /tools/usage: this UTC month's requests, settled executions and charges."""
        return cast(Usage, self._http.request("GET", "/tools/usage").body["data"])

    # --- the paid flow -----------------------------------------------------------------------

    def wait(
        self,
        execution: Union[str, Execution],
        *,
        strategy: str = "auto",
        on_progress: Optional[ProgressCallback] = None,
        timeout: Optional[float] = None,
        first_event_timeout_seconds: float = DEFAULT_FIRST_EVENT_TIMEOUT_SECONDS,
    ) -> Execution:
        """Follows an execution until its status is final and returns it (whatever that status).
        ``strategy``: ``auto`` (the event stream; ``Prefer: wait`` when the stream is unusable;
        polling when the server ignores the wait), ``stream``, ``wait`` or ``poll``. ``timeout``
        (seconds) raises TesAbortError naming the execution, which goes on on the server."""
        check_strategy(strategy)
        deadline = Deadline(timeout)
        current = self.poll(execution, deadline=deadline).execution if isinstance(execution, str) else execution
        try:
            return follow_execution(
                self,
                current,
                FollowOptions(strategy, deadline, on_progress, first_event_timeout_seconds, None),
            )
        except TesError as err:
            if err.execution_id is None:
                err.execution_id = current["id"]
            raise

    def run(
        self,
        tool: str,
        arguments: ToolArguments,
        *,
        on_progress: Optional[ProgressCallback] = None,
        strategy: str = "auto",
        first_event_timeout_seconds: float = DEFAULT_FIRST_EVENT_TIMEOUT_SECONDS,
        timeout: Optional[float] = None,
        maximum_charge_micros: Optional[int] = None,
        quote: Optional[Quote] = None,
        idempotency_key: Optional[str] = None,
    ) -> RunResult:
        """Quote (or use ``quote``), refuse when its maximum is above ``maximum_charge_micros``,
        submit with ONE idempotency key (every resend after a lost connection or a 5xx carries
        the same key and body, so a run creates at most one execution and one reservation),
        follow the execution until it ends (``strategy``, as wait()), and return it with its
        artifacts. The money 429s are raised after one send. Every TesError raised after the
        key was made carries it (``idempotency_key``); when the submit got no definite answer
        (no answer after every resend, a 5xx) it says ``may_have_been_accepted``: call run()
        again with ``idempotency_key=err.idempotency_key``, never with a new key, or it can pay
        twice. Raises ExecutionUnsuccessfulError
        when it ends failed, cancelled or needs_review (do not rerun those: contact support).
        Only ``strategy="wait"`` sends ``Prefer: wait`` on the submit: the others want the
        answer at once, so the stream reports progress from the first moment."""
        # Checked before anything is spent: a typo must not leave a paid execution unfollowed.
        check_strategy(strategy)
        if maximum_charge_micros is not None:
            _check_micros("maximum_charge_micros", maximum_charge_micros)
        deadline = Deadline(timeout)
        execution_id: Optional[str] = None
        key: Optional[str] = None
        try:
            q = quote if quote is not None else self.quote(tool, arguments)
            if maximum_charge_micros is not None and q["maximumChargeMicros"] > maximum_charge_micros:
                raise QuoteAboveMaximumError(q["maximumChargeMicros"], maximum_charge_micros)
            key = idempotency_key if idempotency_key is not None else new_idempotency_key()
            submitted = self.submit(
                tool,
                arguments,
                price_version=q["priceVersion"],
                maximum_charge_micros=q["maximumChargeMicros"],
                idempotency_key=key,
                wait_seconds=WAIT_SECONDS if strategy == "wait" else None,
            )
            execution_id = submitted.execution["id"]
            if on_progress is not None:
                on_progress(submitted.execution)
            options = FollowOptions(strategy, deadline, on_progress, first_event_timeout_seconds, submitted.retry_after_seconds)
            execution = follow_execution(self, submitted.execution, options)
            if execution["status"] != "succeeded":
                raise ExecutionUnsuccessfulError(execution)
            artifacts = [self._artifact(execution["id"], a) for a in (execution["output"] or {}).get("artifacts", [])]
            return RunResult(execution, artifacts, q, key, submitted.replayed)
        except TesError as err:
            if execution_id is not None and err.execution_id is None:
                err.execution_id = execution_id
            if key is not None:
                mark_submit_error(err, key)
            raise

    def _artifact(self, execution_id: str, a: Artifact) -> RunArtifact:
        return RunArtifact(
            id=a["id"],
            format=a["format"],
            mime_type=a["mimeType"],
            size_bytes=a["sizeBytes"],
            sha256=a["sha256"],
            expires_at=a["expiresAt"],
            execution_id=execution_id,
            _client=self,
        )

