"""What submit() and run() return."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional, Union

from .types import Download, Execution, Quote

if TYPE_CHECKING:
    from .client import TesClient

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class SubmitResult:
    execution: Execution
    #: True when the gateway answered a resend with the execution it had already created.
    replayed: bool
    #: Seconds the gateway asked the caller to wait before the first poll (202 Retry-After).
    retry_after_seconds: Optional[int]
    #: The gateway honoured ``wait_seconds``: the execution ended within the wait.
    preference_applied: bool


@dataclass(frozen=True)
class RunArtifact:
    """One file an execution made, with download helpers (each checks size and sha256)."""

    id: str
    format: str
    mime_type: str
    size_bytes: int
    sha256: str
    expires_at: str
    execution_id: str
    _client: TesClient = field(repr=False, compare=False)

    def download(self) -> bytes:
        """The bytes, checked against size_bytes and sha256."""
        return self._client.download(self.execution_id, self.id)

    def download_to(self, path: PathLike) -> str:
        """Saves the file (checked) at ``path``, or as ``<id>.<format>`` inside it when it is a folder."""
        target = os.fspath(path)
        if os.path.isdir(target):
            target = os.path.join(target, f"{self.id}.{self.format}")
        return self._client.download_to(self.execution_id, self.id, target)

    def download_url(self) -> Download:
        """A fresh presigned URL (≤ 300 s; private: do not log it)."""
        return self._client.download_url(self.execution_id, self.id)


@dataclass(frozen=True)
class RunResult:
    execution: Execution
    artifacts: List[RunArtifact]
    quote: Quote
    idempotency_key: str
    #: True when the accepted answer was a replay of an earlier send of this run's submit.
    replayed: bool
