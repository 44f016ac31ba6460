"""Idempotency keys for paid submits (the TypeScript SDK's idempotency.ts)."""

from __future__ import annotations

import re
import uuid

#: The contract's Idempotency-Key form: 8-128 of letters, digits, ``.``, ``_``, ``:``, ``-``.
IDEMPOTENCY_KEY_PATTERN = re.compile(r"[A-Za-z0-9._:-]{8,128}")


def new_idempotency_key(prefix: str = "tes") -> str:
    """A fresh key for one logical submit. Make it once per run and reuse it for every resend
    of that submit: a new key on a resend is a second paid execution."""
    key = f"{prefix}-{uuid.uuid4()}"
    if not is_valid_idempotency_key(key):
        raise ValueError(f"idempotency key prefix {prefix!r} gives an invalid key")
    return key


def is_valid_idempotency_key(key: str) -> bool:
    return isinstance(key, str) and IDEMPOTENCY_KEY_PATTERN.fullmatch(key) is not None
