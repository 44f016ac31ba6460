"""The MIME type of upload bytes (the TypeScript SDK's media.ts)."""

from __future__ import annotations

import os
from typing import Optional

#: The upload formats the API accepts, by their canonical MIME types.
UPLOAD_MIME_TYPES = ("image/jpeg", "image/png", "audio/wav", "audio/mpeg", "video/mp4")

_BY_EXTENSION = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".mp4": "video/mp4",
    ".m4v": "video/mp4",
}


def detect_mime_type(data: bytes, file_name: Optional[str] = None) -> Optional[str]:
    """The MIME type from the leading bytes, else from the file name. The gateway checks the
    magic bytes itself; this only saves the caller from naming the type."""
    b = bytes(data[:12])
    if b[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if b[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if len(b) >= 12 and b[:4] == b"RIFF" and b[8:12] == b"WAVE":
        return "audio/wav"
    if len(b) >= 12 and b[4:8] == b"ftyp":
        return "video/mp4"
    if b[:3] == b"ID3":
        return "audio/mpeg"
    if len(b) >= 2 and b[0] == 0xFF and (b[1] & 0xE0) == 0xE0:
        return "audio/mpeg"
    if file_name is None:
        return None
    return _BY_EXTENSION.get(os.path.splitext(file_name)[1].lower())
