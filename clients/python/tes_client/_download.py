"""Artifact bytes from object storage, checked against their size and sha256."""

from __future__ import annotations

import hashlib
from typing import IO, Callable

from ._http import NETWORK_ERRORS, RetryOptions, backoff_seconds, connect, sleep
from .errors import ArtifactIntegrityError, TesError, TesNetworkError
from .types import Download

_CHUNK = 65536


def fetch_artifact(get_link: Callable[[], Download], artifact_id: str, sink: IO[bytes], retry: RetryOptions, user_agent: str) -> None:
    """Writes one artifact into ``sink`` (emptied first), streamed and hashed as it comes. A
    failed fetch asks for a fresh URL each time (URLs expire). The object-storage request
    carries no API key (the URL is signed, and the key must not travel to storage), and
    redirects are not followed. A size or sha256 that does not match is an
    ArtifactIntegrityError, not retried."""
    attempt = 0
    while True:
        attempt += 1
        link = get_link()
        sink.seek(0)
        sink.truncate()
        digest = hashlib.sha256()
        size = 0
        try:
            conn, target = connect(link["url"], retry.attempt_timeout_seconds)
            try:
                conn.request("GET", target, headers={"User-Agent": user_agent})
                res = conn.getresponse()
                if res.status != 200:
                    res.read()
                    raise TesError(
                        "artifact_download_failed",
                        f"artifact {artifact_id}: object storage answered HTTP {res.status}",
                    )
                while True:
                    chunk = res.read(_CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    size += len(chunk)
                    sink.write(chunk)
            finally:
                conn.close()
        except (TesError, *NETWORK_ERRORS) as err:
            if attempt >= retry.max_attempts:
                if isinstance(err, TesError):
                    raise
                raise TesNetworkError(f"artifact {artifact_id}: download failed after {attempt} attempts") from err
            sleep(backoff_seconds(attempt, retry))
            continue
        sink.flush()
        sha256 = digest.hexdigest()
        if size != link["sizeBytes"] or sha256 != link["sha256"]:
            raise ArtifactIntegrityError(
                f"artifact {artifact_id}: got {size} bytes with sha256 {sha256}, "
                f"expected {link['sizeBytes']} bytes with {link['sha256']}"
            )
        return

