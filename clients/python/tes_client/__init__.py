"""Python client of the Tool Execution Service (standard library only; Python ≥ 3.9).

    from tes_client import TesClient
    tes = TesClient(os.environ["TES_API_KEY"], "https://api.example.com")
    result = tes.run("image.render", {"text": "Hello", "width": 800, "height": 600})
    result.artifacts[0].download_to("hello.png")   # checked against its sha256

The same surface and semantics as the TypeScript SDK (clients/typescript): see README.md.
"""

from ._error_codes import ERROR_CODES
from ._follow import DEFAULT_FIRST_EVENT_TIMEOUT_SECONDS, RUN_STRATEGIES, WAIT_SECONDS, PollResult
from ._http import RetryOptions
from .client import CLIENT_VERSION, DEFAULT_BASE_URL, DEFAULT_POLL_INTERVAL_SECONDS, TesClient
from .errors import (
    ArtifactIntegrityError,
    AuthenticationError,
    ExecutionDisabledError,
    ExecutionUnsuccessfulError,
    FailedPreconditionError,
    IdempotencyConflictError,
    InsufficientBalanceError,
    InternalServerError,
    InvalidRequestError,
    MaximumChargeInsufficientError,
    MonthlyCapExceededError,
    NotFoundError,
    PermissionDeniedError,
    PriceVersionMismatchError,
    QuoteAboveMaximumError,
    RateLimitedError,
    ServiceUnavailableError,
    StreamUnavailableError,
    TesAbortError,
    TesApiError,
    TesError,
    TesNetworkError,
    error_from_response,
    parse_retry_after,
)
from .events import DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS, ExecutionEvents
from .idempotency import IDEMPOTENCY_KEY_PATTERN, is_valid_idempotency_key, new_idempotency_key
from .media import UPLOAD_MIME_TYPES, detect_mime_type
from .queue import QueuePlace, describe_queue_place, queue_place
from .results import RunArtifact, RunResult, SubmitResult
from .sse import SseEvent, SseParser
from .types import (
    FINAL_STATUSES,
    Artifact,
    ImageFacts,
    MediaFacts,
    Catalog,
    Download,
    Execution,
    ExecutionList,
    ExecutionStatus,
    Progress,
    Project,
    Quote,
    Step,
    Tool,
    ToolArguments,
    UploadedFile,
    Usage,
    WebhookEvent,
    is_final,
)
from .webhooks import WebhookVerificationError, verify_webhook

__version__ = CLIENT_VERSION

__all__ = [
    "ArtifactIntegrityError",
    "Artifact",
    "AuthenticationError",
    "CLIENT_VERSION",
    "Catalog",
    "DEFAULT_BASE_URL",
    "DEFAULT_FIRST_EVENT_TIMEOUT_SECONDS",
    "DEFAULT_POLL_INTERVAL_SECONDS",
    "DEFAULT_STREAM_IDLE_TIMEOUT_SECONDS",
    "Download",
    "ERROR_CODES",
    "Execution",
    "ExecutionDisabledError",
    "ExecutionEvents",
    "ExecutionList",
    "ExecutionStatus",
    "ExecutionUnsuccessfulError",
    "FINAL_STATUSES",
    "FailedPreconditionError",
    "ImageFacts",
    "MediaFacts",
    "IDEMPOTENCY_KEY_PATTERN",
    "IdempotencyConflictError",
    "InsufficientBalanceError",
    "InternalServerError",
    "InvalidRequestError",
    "MaximumChargeInsufficientError",
    "MonthlyCapExceededError",
    "NotFoundError",
    "PermissionDeniedError",
    "PollResult",
    "PriceVersionMismatchError",
    "Progress",
    "Project",
    "QueuePlace",
    "Quote",
    "QuoteAboveMaximumError",
    "RUN_STRATEGIES",
    "RateLimitedError",
    "RetryOptions",
    "RunArtifact",
    "RunResult",
    "ServiceUnavailableError",
    "SseEvent",
    "SseParser",
    "Step",
    "StreamUnavailableError",
    "SubmitResult",
    "TesAbortError",
    "TesApiError",
    "TesClient",
    "TesError",
    "TesNetworkError",
    "Tool",
    "ToolArguments",
    "UPLOAD_MIME_TYPES",
    "UploadedFile",
    "Usage",
    "WAIT_SECONDS",
    "WebhookEvent",
    "WebhookVerificationError",
    "describe_queue_place",
    "detect_mime_type",
    "error_from_response",
    "is_final",
    "is_valid_idempotency_key",
    "new_idempotency_key",
    "parse_retry_after",
    "queue_place",
    "verify_webhook",
]
