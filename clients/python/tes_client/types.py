"""The API's JSON objects as TypedDicts (keys exactly as on the wire: camelCase), after
services/gateway/openapi.json. Money is always an ``int`` of micro-USD (1 USD = 1,000,000)."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

ExecutionStatus = Literal["queued", "running", "waiting", "succeeded", "failed", "cancelled", "needs_review"]
StepStatus = Literal["running", "succeeded", "failed", "cancelled"]
Scope = Literal["project:read", "usage:read", "tools:read", "tools:execute", "executions:read"]
Role = Literal["ADMIN", "MEMBER"]

#: Tool arguments: any JSON object valid against the tool's inputSchema.
ToolArguments = Dict[str, Any]

#: States after which an execution does not change by itself (needs_review waits for an operator).
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "needs_review")


def is_final(status: str) -> bool:
    return status in FINAL_STATUSES


class ModelPrice(TypedDict):
    description: str


class Model(TypedDict):
    id: str
    description: str
    available: bool
    example: Dict[str, Any]
    price: Optional[ModelPrice]


class ToolPrice(TypedDict):
    minimumMicros: int
    unit: str
    description: str


class Tool(TypedDict):
    name: str
    description: str
    category: str
    available: bool
    inputSchema: Dict[str, Any]
    example: Dict[str, Any]
    models: List[Model]
    price: Optional[ToolPrice]


class Catalog(TypedDict):
    priceVersion: str
    currency: Literal["usd"]
    executionEnabled: bool
    tools: List[Tool]


class Quote(TypedDict):
    tool: str
    model: str
    priceVersion: str
    currency: Literal["usd"]
    minimumChargeMicros: int
    maximumChargeMicros: int
    unit: str
    estimatedUnits: float


class Artifact(TypedDict):
    id: str
    format: str
    mimeType: str
    sizeBytes: int
    sha256: str
    expiresAt: str


class _ProgressRequired(TypedDict):
    completedSteps: int
    totalSteps: int
    currentStep: Optional[str]


class Progress(_ProgressRequired, total=False):
    """``queuePosition`` and ``estimatedStartAt`` say where a ``queued`` execution stands in its
    category's line: absent (or None) once it started, and always absent from a server older than
    the fair-share order. ``queue_place()`` reads them."""

    #: 1 is the next to start.
    queuePosition: Optional[int]
    #: RFC 3339 on the server's clock; None when the server has no recent start rate to estimate from.
    estimatedStartAt: Optional[str]


class Step(TypedDict):
    index: int
    name: str
    status: StepStatus
    costMicros: int
    startedAt: str
    finishedAt: Optional[str]


class Execution(TypedDict):
    id: str
    tool: str
    model: str
    status: ExecutionStatus
    arguments: Dict[str, Any]
    priceVersion: str
    reservedMicros: int
    chargedMicros: int
    currency: Literal["usd"]
    cancelRequested: bool
    progress: Progress
    steps: List[Step]
    #: None until succeeded; then ``{"artifacts": [...], ...small facts}``.
    output: Optional[Dict[str, Any]]
    errorCode: Optional[str]
    errorMessage: Optional[str]
    createdAt: str
    startedAt: Optional[str]
    finishedAt: Optional[str]


class ExecutionList(TypedDict):
    data: List[Execution]
    hasMore: bool
    nextBefore: Optional[str]


class ImageFacts(TypedDict):
    kind: Literal["image"]
    #: Upright size in pixels (after EXIF orientation).
    width: int
    height: int


class VideoStream(TypedDict):
    codec: str
    width: int
    height: int
    durationSeconds: Optional[float]
    frameRate: Optional[float]


class AudioStream(TypedDict):
    codec: str
    sampleRate: float
    channels: int
    #: Decoded samples over the sample rate: the length audio tools bill an output by.
    decodedSeconds: float


class MediaFacts(TypedDict):
    kind: Literal["media"]
    durationSeconds: Optional[float]
    video: Optional[VideoStream]
    audio: Optional[AudioStream]


class UploadedFile(TypedDict):
    id: str
    format: Literal["jpeg", "png", "wav", "mp3", "mp4"]
    mimeType: str
    sizeBytes: int
    sha256: str
    #: What the upload was measured to hold; quotes of tools that read it are priced from these.
    #: None when the gateway that stored it could not measure it (no ffprobe).
    facts: Optional[Union[ImageFacts, MediaFacts]]
    expiresAt: str


class Download(TypedDict):
    #: Presigned object-storage GET, valid at most 300 s. Private: do not log it.
    url: str
    expiresAt: str
    mimeType: str
    sizeBytes: int
    sha256: str


class _Named(TypedDict):
    id: str
    name: str


class _Key(TypedDict):
    id: str
    name: str
    scopes: List[Scope]
    role: Role


class _Balance(TypedDict):
    availableMicros: int
    reservedMicros: int
    currency: Literal["usd"]


class Project(TypedDict):
    organization: _Named
    project: _Named
    key: _Key
    balance: _Balance
    monthlyCapMicros: Optional[int]


class _Period(TypedDict):
    start: str
    end: str


class Usage(TypedDict):
    period: _Period
    requestCount: int
    executionCount: int
    chargedMicros: int
    reservedMicros: int
    currency: Literal["usd"]
    monthlyCapMicros: Optional[int]
    remainingCapMicros: Optional[int]


WebhookEventType = Literal["execution.succeeded", "execution.failed", "execution.cancelled", "execution.needs_review"]


class WebhookEvent(TypedDict):
    """The event a webhook carries (Standard Webhooks body)."""

    type: WebhookEventType
    #: When the event happened (RFC 3339); the same on every retry.
    timestamp: str
    #: The execution, exactly as ``GET /tools/executions/{id}`` shows it.
    data: Execution
