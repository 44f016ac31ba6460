"""The exceptions this package raises, mirroring the TypeScript SDK's (clients/typescript/src/errors.ts).

Everything raised for an API, network or execution problem is a ``TesError`` with a stable
snake_case ``code``. API answers are ``TesApiError`` subclasses chosen by code, then by HTTP
status. An API error's message is one line: what went wrong with the amounts and limits of its
details, then the code, the status and the request id; never the API key, a request body or a
download URL.
"""

from __future__ import annotations

import datetime
import email.utils
import re
import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Protocol, Type

from ._words import api_error_sentence, problem_lines

if TYPE_CHECKING:
    from .types import Execution


class TesError(Exception):
    """Base of everything this package raises for the service; ``code`` is stable and snake_case."""

    code: str
    #: Set by run() on errors after the submit was accepted: that execution exists and may be charged.
    execution_id: Optional[str]
    #: The Idempotency-Key of the paid submit this error belongs to (set by submit() and run(),
    #: run's generated key included). Submitting the same tool, arguments and quote again with
    #: this key is always safe: the gateway answers with the execution the key made, if any, and
    #: never reserves twice. A new key (a plain rerun) can pay twice.
    idempotency_key: Optional[str]
    #: True when the submit got no definite answer: no answer after every resend, a 5xx, an
    #: answer that was not JSON. An execution may then exist and hold money without
    #: ``execution_id`` naming it: resend with ``idempotency_key`` to learn which.
    may_have_been_accepted: bool

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.execution_id = None
        self.idempotency_key = None
        self.may_have_been_accepted = False


class TesApiError(TesError):
    """An error answer of the API (the ``{"error": {...}}`` envelope, or a non-JSON page)."""

    def __init__(
        self,
        *,
        status: int,
        error_status: str,
        code: str,
        details: Optional[Dict[str, Any]],
        request_id: Optional[str],
        retry_after_seconds: Optional[int],
    ) -> None:
        where = f", request {request_id}" if request_id else ""
        sentence = api_error_sentence(code, details or {}, retry_after_seconds)
        super().__init__(code, f"{sentence} ({code}, HTTP {status}{where})")
        # A traceback shows each schema problem on a line of its own (PEP 678 notes, Python 3.11+).
        problems = problem_lines(details or {})
        if len(problems) > 1 and hasattr(self, "add_note"):
            for line in problems:
                self.add_note(f"  {line}")
        #: HTTP status of the response.
        self.status = status
        #: ``error.status`` of the envelope, e.g. RESOURCE_EXHAUSTED (empty for a non-JSON answer).
        self.error_status = error_status
        self.details = details
        self.request_id = request_id
        self.retry_after_seconds = retry_after_seconds

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, request_id={self.request_id!r}, details={self.details!r})"

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again can succeed (5xx other than execution_disabled)."""
        return self.status >= 500 and self.code != "execution_disabled"


class InvalidRequestError(TesApiError):
    """400/413 INVALID_ARGUMENT: fix the request (``details["errors"]`` lists schema problems)."""


class FailedPreconditionError(TesApiError):
    """400 FAILED_PRECONDITION."""


class PriceVersionMismatchError(FailedPreconditionError):
    """The price list changed since the quote: quote again (``details["currentPriceVersion"]``)."""


class MaximumChargeInsufficientError(FailedPreconditionError):
    """maximumChargeMicros is below the current quote (``details["requiredMaximumChargeMicros"]``)."""


class AuthenticationError(TesApiError):
    """401: missing, invalid, expired or revoked key."""


class PermissionDeniedError(TesApiError):
    """403: missing scope (``details["requiredScope"]``) or project permission."""


class NotFoundError(TesApiError):
    """404: unknown route, tool, execution or artifact, or an unavailable tool or model; 405 too."""


class IdempotencyConflictError(TesApiError):
    """409: the idempotency key was used with another body or by another key of the project."""


class RateLimitedError(TesApiError):
    """429 for the request rate: may be sent again after ``retry_after_seconds``."""

    @property
    def reset_seconds(self) -> Optional[int]:
        """Seconds until the rate-limit window resets (the Retry-After the gateway sent)."""
        return self.retry_after_seconds


class InsufficientBalanceError(TesApiError):
    """429 money refusal: not enough available balance. Retrying cannot help; never retried."""


class MonthlyCapExceededError(TesApiError):
    """429 money refusal: the monthly cap would be exceeded. Retrying cannot help; never retried."""


class InternalServerError(TesApiError):
    """500."""


class ServiceUnavailableError(TesApiError):
    """503 (and other 5xx): temporarily unavailable."""


class ExecutionDisabledError(ServiceUnavailableError):
    """503 execution_disabled: execution is switched off catalog-wide; nothing was reserved."""


class TesNetworkError(TesError):
    """The request never got an HTTP answer (connection refused or lost, DNS, TLS), after retries."""

    def __init__(self, message: str) -> None:
        super().__init__("network_error", message)


class StreamUnavailableError(TesError):
    """The event stream cannot be used from here: the server does not offer it, or something
    between answers with another content type or holds the events back (no first event in
    time). ``run(strategy="auto")`` then waits with ``Prefer: wait`` instead; ``events()`` and
    ``strategy="stream"`` raise it."""

    def __init__(self, message: str) -> None:
        super().__init__("stream_unavailable", message)


class ExecutionUnsuccessfulError(TesError):
    """run() ended on a status other than succeeded; ``execution`` tells what was charged."""

    def __init__(self, execution: Execution) -> None:
        status = execution["status"]
        error_code = execution.get("errorCode")
        code = (error_code or "execution_failed") if status == "failed" else f"execution_{status}"
        detail = f" ({error_code})" if error_code else ""
        super().__init__(
            code,
            f"execution {execution['id']} ended {status}{detail}, charged {execution['chargedMicros']} micros",
        )
        self.execution = execution
        self.execution_id = execution["id"]


class ArtifactIntegrityError(TesError):
    """Downloaded bytes do not match the artifact's size or sha256."""

    def __init__(self, message: str) -> None:
        super().__init__("artifact_integrity", message)


class QuoteAboveMaximumError(TesError):
    """The quote is above the maximum the caller allowed for run(); nothing was submitted."""

    def __init__(self, quoted: int, allowed: int) -> None:
        super().__init__(
            "quote_above_maximum",
            f"the quote's maximum {quoted} micros is above the allowed {allowed} micros; nothing was submitted",
        )
        self.quoted_maximum_micros = quoted
        self.allowed_maximum_micros = allowed


class TesAbortError(TesError):
    """The caller's ``timeout`` ran out. When it ran out after the submit was accepted the
    execution goes on (and may be charged): ``execution_id`` says which one to poll or cancel."""

    def __init__(self, execution_id: Optional[str]) -> None:
        message = (
            f"gave up waiting for {execution_id}; the execution continues on the server"
            if execution_id
            else "aborted"
        )
        super().__init__("aborted", message)
        self.execution_id = execution_id


def mark_submit_error(err: BaseException, idempotency_key: str) -> None:
    """Marks an error a submit sent with ``idempotency_key`` ended in: the key, and whether the
    submit may still have been accepted. Only the gateway's refusal says it was not: a 4xx or 503
    execution_disabled, which it answers only after finding no execution bound to the key (a
    resend of an accepted submit is answered with that execution instead). A 429
    rate_limit_exceeded comes before that lookup: after an earlier send lost its answer, the
    submit may have been accepted. Anything that is not a TesError is left alone."""
    if not isinstance(err, TesError):
        return
    if err.idempotency_key is None:
        err.idempotency_key = idempotency_key
    if err.execution_id is None:
        err.may_have_been_accepted = (
            not isinstance(err, TesApiError)
            or (err.status >= 500 and err.code != "execution_disabled")
            or err.code == "rate_limit_exceeded"
        )


class HeaderLookup(Protocol):
    """Case-insensitive header access, as ``http.client.HTTPMessage`` offers."""

    def get(self, name: str, /) -> Optional[str]: ...


_BY_CODE: Dict[str, Type[TesApiError]] = {
    "price_version_mismatch": PriceVersionMismatchError,
    "maximum_charge_insufficient": MaximumChargeInsufficientError,
    "idempotency_key_reused": IdempotencyConflictError,
    "rate_limit_exceeded": RateLimitedError,
    "insufficient_balance": InsufficientBalanceError,
    "monthly_cap_exceeded": MonthlyCapExceededError,
    "execution_disabled": ExecutionDisabledError,
}


def _class_for(status: int, error_status: str, code: str) -> Type[TesApiError]:
    exact = _BY_CODE.get(code)
    if exact is not None:
        return exact
    if status == 400 and error_status == "FAILED_PRECONDITION":
        return FailedPreconditionError
    if status in (400, 413):
        return InvalidRequestError
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDeniedError
    if status in (404, 405):
        return NotFoundError
    if status == 409:
        return IdempotencyConflictError
    if status == 500:
        return InternalServerError
    if status > 500:
        return ServiceUnavailableError
    return TesApiError


_DIGITS = re.compile(r"[0-9]+")


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[int]:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or bad."""
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if _DIGITS.fullmatch(text):
        return int(text)
    try:
        at = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if at is None:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.timezone.utc)
    seconds = at.timestamp() - (time.time() if now is None else now)
    return max(0, int(-(-seconds // 1)))


def error_from_response(status: int, body: Any, headers: HeaderLookup) -> TesApiError:
    """The typed error for an HTTP error answer. A body that is not the API's envelope (a
    proxy's HTML page, say) still gives a TesApiError, with the code ``http_<status>``.
    ``headers`` is looked up case-insensitively (``http.client.HTTPMessage`` is)."""
    envelope = body.get("error") if isinstance(body, dict) else None
    if not isinstance(envelope, dict):
        envelope = {}
    message = envelope.get("message")
    code = message if isinstance(message, str) else f"http_{status}"
    raw_status = envelope.get("status")
    error_status = raw_status if isinstance(raw_status, str) else ""
    details = envelope.get("details")
    cls = _class_for(status, error_status, code)
    return cls(
        status=status,
        error_status=error_status,
        code=code,
        details=details if isinstance(details, dict) else None,
        request_id=headers.get("x-request-id") or None,
        retry_after_seconds=parse_retry_after(headers.get("retry-after")),
    )
