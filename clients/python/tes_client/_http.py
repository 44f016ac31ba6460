"""HTTP with the API key in the Authorization header only, and the SDK's retry policy.

Built on ``http.client`` (not urllib): redirects are never followed (a redirect could carry
the key elsewhere), environment proxies are not used (as Node's fetch, which the TypeScript
SDK uses, does not), and a stream's socket timeout can be changed while it is read.
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .errors import RateLimitedError, TesAbortError, TesError, TesNetworkError, error_from_response


@dataclass(frozen=True)
class RetryOptions:
    """Retry and backoff bounds (the TypeScript SDK's, in seconds)."""

    #: Sends of one request on a lost connection or a retryable 5xx, the first included.
    max_attempts: int = 4
    #: First backoff; it doubles per attempt up to max_delay_seconds, with ±25 % jitter.
    base_delay_seconds: float = 0.5
    max_delay_seconds: float = 8.0
    #: How many ``429 rate_limit_exceeded`` answers one request waits out.
    rate_limit_retries: int = 2
    #: A Retry-After longer than this is not waited out: the RateLimitedError is raised.
    max_rate_limit_wait_seconds: float = 60.0
    #: Socket timeout of one send (connect, and each read); a ``Prefer: wait`` send gets its wait on top.
    attempt_timeout_seconds: float = 60.0
    #: Consecutive failed connections of an event stream before events() gives up; a
    #: connection that delivers an event resets the count.
    max_reconnects: int = 8


def backoff_seconds(attempt: int, retry: RetryOptions) -> float:
    base = min(retry.max_delay_seconds, retry.base_delay_seconds * 2 ** max(0, attempt - 1))
    return base * (0.75 + random.random() * 0.5)


class Deadline:
    """A point in monotonic time after which waiting stops (run()'s and wait()'s ``timeout``)."""

    def __init__(self, seconds: Optional[float]) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> Optional[float]:
        return None if self.at is None else self.at - time.monotonic()

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0

    def check(self) -> None:
        if self.expired():
            raise TesAbortError(None)

    def cap(self, timeout: float) -> float:
        """``timeout``, shortened to what is left (never zero: a zero socket timeout means non-blocking)."""
        left = self.remaining()
        return timeout if left is None else max(0.001, min(timeout, left))


NO_DEADLINE = Deadline(None)


def sleep(seconds: float, deadline: Deadline = NO_DEADLINE) -> None:
    """Sleeps, or raises TesAbortError when the deadline comes first."""
    left = deadline.remaining()
    if left is not None and left < seconds:
        time.sleep(max(0.0, left))
        raise TesAbortError(None)
    time.sleep(max(0.0, seconds))


@dataclass
class HttpResponse:
    status: int
    #: Case-insensitive: ``headers.get("retry-after")``.
    headers: http.client.HTTPMessage
    body: Any


# What a send that got no (complete) answer raises: refused, reset, timed out, TLS, a cut body.
NETWORK_ERRORS = (OSError, http.client.HTTPException)


def connect(url: str, timeout: float) -> Tuple[http.client.HTTPConnection, str]:
    """A connection to the URL's origin and the path with query to request on it."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None:
        raise TesError("invalid_url", "a URL without a host")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if parts.scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    elif parts.scheme == "http":
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    else:
        raise TesError("invalid_url", f"unsupported URL scheme {parts.scheme!r}")
    return conn, target


def parse_json(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:
        return None


def _describe(err: BaseException) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class StreamResponse:
    """An open streaming answer: read it with read1(); the socket's timeout may be changed."""

    def __init__(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, sock: Any) -> None:
        self._conn = conn
        self._response = response
        self._sock = sock
        self.status = response.status
        self.headers = response.headers

    def set_timeout(self, seconds: float) -> None:
        self._sock.settimeout(seconds)

    def read1(self) -> bytes:
        """The bytes available now (waiting for some); b"" at the end of the stream."""
        return self._response.read1(65536)

    def close(self) -> None:
        self._response.close()
        self._conn.close()


class Transport:
    """Sends requests with the key in the Authorization header (never in the URL) and retries
    what is safe to retry:

    - a lost connection or a 5xx (except 503 execution_disabled): the SAME bytes are sent
      again, so a paid submit keeps its Idempotency-Key and body and the gateway answers a
      resend with the original execution;
    - ``429 rate_limit_exceeded``: after its Retry-After, a bounded number of times;
    - never the money 429s (insufficient_balance, monthly_cap_exceeded) nor any 4xx: the same
      request cannot succeed, and looping would only burn the rate limit.
    """

    def __init__(self, *, api_key: str, base_url: str, retry: RetryOptions, user_agent: str) -> None:
        self.__api_key = api_key
        self.base_url = base_url
        self.retry = retry
        self.user_agent = user_agent

    def __repr__(self) -> str:
        return f"Transport(base_url={self.base_url!r})"

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: Optional[Dict[str, str]] = None,
        wait_seconds: Optional[int] = None,
        deadline: Deadline = NO_DEADLINE,
    ) -> HttpResponse:
        # Serialised once: every resend carries byte-identical content.
        payload = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
        all_headers = {"Accept": "application/json", "User-Agent": self.user_agent, **(headers or {})}
        all_headers["Authorization"] = f"Bearer {self.__api_key}"
        if payload is not None:
            all_headers["Content-Type"] = "application/json"
        if wait_seconds is not None:
            all_headers["Prefer"] = f"wait={wait_seconds}"
        url = self.base_url + path
        timeout = self.retry.attempt_timeout_seconds + (wait_seconds or 0)
        rate_limit_waits = 0
        attempt = 0
        while True:
            attempt += 1
            deadline.check()
            try:
                conn, target = connect(url, deadline.cap(timeout))
                try:
                    conn.request(method, target, body=payload, headers=all_headers)
                    res = conn.getresponse()
                    data = res.read()
                finally:
                    conn.close()
            except NETWORK_ERRORS as err:
                deadline.check()
                # No answer (or half of one): the request may or may not have been applied.
                if attempt >= self.retry.max_attempts:
                    raise TesNetworkError(
                        f"{method} {path}: no answer after {attempt} attempts ({_describe(err)})"
                    ) from err
                sleep(backoff_seconds(attempt, self.retry), deadline)
                continue
            parsed = parse_json(data)
            if 200 <= res.status < 300:
                if parsed is None:
                    raise TesError("invalid_response", f"{method} {path}: HTTP {res.status} without a JSON body")
                return HttpResponse(res.status, res.headers, parsed)
            error = error_from_response(res.status, parsed, res.headers)
            if isinstance(error, RateLimitedError):
                wait = float(error.retry_after_seconds if error.retry_after_seconds is not None else 1)
                if rate_limit_waits >= self.retry.rate_limit_retries or wait > self.retry.max_rate_limit_wait_seconds:
                    raise error
                rate_limit_waits += 1
                sleep(wait, deadline)
                attempt -= 1  # a rate-limit wait is not a failed attempt
                continue
            if error.retryable and attempt < self.retry.max_attempts:
                sleep(max(backoff_seconds(attempt, self.retry), float(error.retry_after_seconds or 0)), deadline)
                continue
            raise error

    def open(self, path: str, *, headers: Dict[str, str], timeout: float) -> StreamResponse:
        """One streaming GET (``Accept: text/event-stream``), answered with the response still
        unread. No retries here: whoever reads the stream knows where to resume (events.py).
        An error answer is raised as its TesApiError; no answer as a TesNetworkError."""
        all_headers = {
            "Accept": "text/event-stream",
            "Cache-Control": "no-cache",
            "User-Agent": self.user_agent,
            **headers,
        }
        all_headers["Authorization"] = f"Bearer {self.__api_key}"
        conn, target = connect(self.base_url + path, timeout)
        try:
            conn.request("GET", target, headers=all_headers)
            # The response reads from this socket: kept to change its timeout once events flow.
            sock = conn.sock
            res = conn.getresponse()
            if 200 <= res.status < 300:
                return StreamResponse(conn, res, sock)
            data = res.read()
        except NETWORK_ERRORS as err:
            conn.close()
            raise TesNetworkError(f"GET {path}: no answer ({_describe(err)})") from err
        conn.close()
        raise error_from_response(res.status, parse_json(data), res.headers)
