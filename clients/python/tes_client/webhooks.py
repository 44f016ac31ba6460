"""Webhook signature verification, identical to the TypeScript SDK's ``verifyWebhook``."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Tuple, Union, cast

from .types import WebhookEvent

#: Header sources: a dict (any key case; a list value counts by its first item), an
#: ``http.client.HTTPMessage`` / ``email.message.Message`` (``self.headers`` in http.server),
#: or any mapping-like object with ``items()``.
Headers = Union[Mapping[str, Union[str, Sequence[str]]], Any]

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/]")


class WebhookVerificationError(Exception):
    """A webhook whose signature, timestamp or headers do not check out: answer it 400 and drop it."""


def verify_webhook(
    secret: str,
    headers: Headers,
    raw_body: Union[str, bytes, bytearray, memoryview],
    *,
    tolerance_seconds: float = 300,
    now: Optional[Callable[[], float]] = None,
) -> WebhookEvent:
    """Checks a delivery as Standard Webhooks says, before trusting any of it: the HMAC-SHA256
    of ``"<webhook-id>.<webhook-timestamp>.<raw body>"`` keyed with the secret's base64 part
    must match one of the signatures in ``webhook-signature``, and the timestamp must be within
    ``tolerance_seconds`` of ``now()`` (Unix seconds; default the clock). Pass the body exactly
    as received: a re-serialised object will not verify. Deliveries are at least once:
    deduplicate on the ``webhook-id`` header, which is the same on every retry.

    Returns the parsed event; raises WebhookVerificationError.
    """
    msg_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not msg_id or not timestamp or not signatures:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise WebhookVerificationError("webhook-timestamp is not a Unix time in seconds")
    current = time.time() if now is None else now()
    if abs(current - int(timestamp)) > tolerance_seconds:
        raise WebhookVerificationError("webhook-timestamp is too far from now")
    if not secret.startswith("whsec_"):
        raise WebhookVerificationError("the secret must be the whsec_… value printed by `webhook create`")
    body = raw_body.encode("utf-8") if isinstance(raw_body, str) else bytes(raw_body)
    mac = hmac.new(_secret_key(secret[6:]), digestmod=hashlib.sha256)
    mac.update(f"{msg_id}.{timestamp}.".encode("utf-8"))
    mac.update(body)
    expected = base64.b64encode(mac.digest())
    if not any(_matches(s, expected) for s in signatures.split(" ")):
        raise WebhookVerificationError("no signature matches")
    try:
        event = json.loads(body.decode("utf-8", errors="replace"), parse_constant=_no_constant)
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
    return cast(WebhookEvent, event)


def _matches(signature: str, expected: bytes) -> bool:
    # As JavaScript's split(',', 2): the version, the value, and nothing after a second comma.
    parts = signature.split(",")
    if parts[0] != "v1" or len(parts) < 2:
        return False
    got = parts[1].encode("utf-8")
    return len(got) == len(expected) and hmac.compare_digest(got, expected)


def _secret_key(encoded: str) -> bytes:
    """The key bytes as Node's ``Buffer.from(s, 'base64')`` reads them: URL-safe letters
    accepted, anything else outside the alphabet skipped, padding optional, and decoding
    stops at the first ``=``."""
    text = encoded.split("=", 1)[0].replace("-", "+").replace("_", "/")
    text = _NOT_BASE64.sub("", text)
    text = text[: len(text) - len(text) % 4] if len(text) % 4 == 1 else text
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as err:
        raise WebhookVerificationError("the secret is not base64") from err


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _header(headers: Headers, name: str) -> Optional[str]:
    items: Iterable[Tuple[str, Any]] = headers.items()
    for key, value in items:
        if isinstance(key, str) and key.lower() == name:
            if isinstance(value, (list, tuple)):
                return str(value[0]) if value else None
            return None if value is None else str(value)
    return None
