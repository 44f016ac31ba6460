"""What an API error answer means, in one line: the same words as the TypeScript SDK's
(clients/typescript/src/error-words.ts; tests/error_sentences.json holds the cases both must say)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

_MIB = 1024 * 1024


def usd(micros: int) -> str:
    """Integer micro-USD as dollars, exact, without trailing zeros but with at least cents."""
    sign = "-" if micros < 0 else ""
    whole, fraction = divmod(abs(micros), 1_000_000)
    return f"{sign}${whole}.{str(fraction).rjust(6, '0').rstrip('0').ljust(2, '0')}"


def byte_size(n: int) -> str:
    """A limit as people read it: "12 MiB (12,582,912 bytes)", "64 KiB (65,536 bytes)"."""
    exact = f"{n:,} bytes"
    for unit, size in (("MiB", _MIB), ("KiB", 1024)):
        if n >= size:
            amount = str(n // size) if n % size == 0 else f"{n / size:.1f}"
            return f"{amount} {unit} ({exact})"
    return exact


def pointer_to_path(pointer: str) -> str:
    """A JSON pointer of an ajv error as an argument path: /slides/1/fileId -> slides[1].fileId."""
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    out = "".join(f"[{p}]" if p.isdigit() else (p if i == 0 else f".{p}") for i, p in enumerate(parts))
    return out or "arguments"


def problem_lines(d: Dict[str, Any]) -> List[str]:
    """The problems of an invalid_arguments or invalid_request answer: the gateway's hint for
    each when it gives one, else the field's path and ajv's message (an older gateway)."""
    errors = d.get("errors")
    lines: List[str] = []
    for p in errors if isinstance(errors, list) else []:
        if not isinstance(p, dict):
            continue
        if isinstance(p.get("hint"), str):
            lines.append(p["hint"])
            continue
        pointer = p.get("instancePath")
        path = pointer_to_path(pointer if isinstance(pointer, str) else "")
        params = p.get("params") if isinstance(p.get("params"), dict) else {}
        extra = f": {params['additionalProperty']}" if isinstance(params.get("additionalProperty"), str) else ""
        allowed = params.get("allowedValues")
        values = f": {', '.join(str(v) for v in allowed)}" if isinstance(allowed, list) else ""
        message = p.get("message") if isinstance(p.get("message"), str) else "is not valid"
        lines.append(f"{path} {message}{extra}{values}")
    return lines


def _num(d: Dict[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(d: Dict[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _invalid(what: str, d: Dict[str, Any]) -> str:
    hint = _str(d, "hint") or "; ".join(problem_lines(d))
    return f"{what}: {hint}" if hint else what


def api_error_sentence(code: str, d: Dict[str, Any], retry_after_seconds: Optional[int]) -> str:
    """One line with the amounts and limits the details carry; an unknown code reads as its words."""
    if code == "insufficient_balance":
        need, have = _num(d, "requiredMicros"), _num(d, "availableMicros")
        if need is None:
            return "insufficient balance"
        tail = "" if have is None else f" and the project has {usd(have)} available"
        return f"insufficient balance: the submit needs {usd(need)} reserved{tail}"
    if code == "monthly_cap_exceeded":
        need = _num(d, "requiredMicros")
        if need is None:
            return "monthly cap reached: the submit would take the project past its monthly cap"
        return f"monthly cap reached: the submit needs {usd(need)} reserved, more than the project's monthly cap leaves"
    if code == "maximum_charge_insufficient":
        need = _num(d, "requiredMaximumChargeMicros")
        what = "it is below the current quote" if need is None else f"this input now needs up to {usd(need)}"
        return f"maximum charge too low: {what}; quote again"
    if code == "price_version_mismatch":
        now = _str(d, "currentPriceVersion")
        return f"the prices changed since the quote{f' (now {now})' if now else ''}; quote again"
    if code == "rate_limit_exceeded":
        return "too many requests" + ("" if retry_after_seconds is None else f": try again in {retry_after_seconds} s")
    if code == "invalid_arguments":
        return _invalid("invalid arguments", d)
    if code == "invalid_request":
        return _invalid("invalid request", d)
    if code == "request_too_large":
        limit = _num(d, "limitBytes")
        return "the request is too large" + ("" if limit is None else f": the gateway takes at most {byte_size(limit)}")
    if code == "file_too_large":
        limit = _num(d, "maxBytes")
        return "the file is too large" + ("" if limit is None else f": an upload is at most {byte_size(limit)}")
    if code == "platform_api_key_scope_required":
        return f"this API key lacks the scope {_str(d, 'requiredScope') or 'this needs'}"
    if code == "tool_not_found":
        return f"no tool named {json.dumps(_str(d, 'tool') or '?')}"
    if code == "tool_unavailable":
        return f"{_str(d, 'tool') or 'the tool'} cannot run now: none of its models is available"
    if code == "file_not_found":
        return f"file {_str(d, 'fileId') or ''} is not in this project or has expired: upload it again".replace("  ", " ")
    if code == "execution_not_cancellable":
        status = _str(d, "status")
        return f"the execution has already ended{f' ({status})' if status else ''}: there is nothing to cancel"
    return code.replace("_", " ")
