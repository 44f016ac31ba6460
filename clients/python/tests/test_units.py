"""The pure parts, without the stack: the SSE parser, Retry-After, error mapping, MIME types, keys."""

from __future__ import annotations

import unittest
from datetime import datetime, timedelta, timezone

from tes_client import (
    ExecutionDisabledError,
    FailedPreconditionError,
    InsufficientBalanceError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    ServiceUnavailableError,
    SseParser,
    TesAbortError,
    TesApiError,
    TesClient,
    TesError,
    TesNetworkError,
    detect_mime_type,
    error_from_response,
    is_valid_idempotency_key,
    new_idempotency_key,
    parse_retry_after,
    Progress,
    QueuePlace,
    describe_queue_place,
    queue_place,
)
from tes_client.errors import mark_submit_error

STREAM = (
    "\ufeffretry: 1000\n\n"
    ": keep-alive\r\n\r\n"
    "event: execution\nid: 7\ndata: {\"id\":\"exe_1\",\n"
    "data:  \"status\":\"running\"}\n\n"
    "event: execution\r\nid: 8\r\ndata: {\"note\":\"é ✓\"}\r\n\r\n"
    "id\ndata\n\n"
    "event: execution\rid: 9\0x\rdata: cut off"
)


class SseParserTest(unittest.TestCase):
    def expected(self, parser: SseParser, events: list) -> None:
        self.assertEqual(
            [(e.type, e.data, e.last_event_id) for e in events],
            [
                ("execution", '{"id":"exe_1",\n "status":"running"}', "7"),
                ("execution", '{"note":"é ✓"}', "8"),
                ("message", "", ""),
            ],
        )
        self.assertEqual(parser.retry_ms, 1000)
        self.assertEqual(parser.comments, 1)

    def test_whole(self) -> None:
        parser = SseParser()
        self.expected(parser, parser.push(STREAM.encode("utf-8")))

    def test_cut_at_every_byte(self) -> None:
        data = STREAM.encode("utf-8")
        for cut in range(1, len(data)):
            parser = SseParser()
            events = parser.push(data[:cut]) + parser.push(data[cut:])
            self.expected(parser, events)

    def test_one_byte_at_a_time(self) -> None:
        parser = SseParser()
        events = []
        for b in STREAM.encode("utf-8"):
            events += parser.push(bytes([b]))
        self.expected(parser, events)


class ErrorMappingTest(unittest.TestCase):
    def err(self, status: int, error_status: str, code: str, headers: dict = {}) -> TesApiError:
        body = {"error": {"status": error_status, "message": code, "details": {"retryable": False}}}
        return error_from_response(status, body, {"x-request-id": "req_1", **headers})

    def test_classes_by_code_then_status(self) -> None:
        self.assertIsInstance(self.err(429, "RESOURCE_EXHAUSTED", "insufficient_balance"), InsufficientBalanceError)
        limited = self.err(429, "RESOURCE_EXHAUSTED", "rate_limit_exceeded", {"retry-after": "7"})
        self.assertIsInstance(limited, RateLimitedError)
        assert isinstance(limited, RateLimitedError)
        self.assertEqual((limited.retry_after_seconds, limited.reset_seconds), (7, 7))
        self.assertIsInstance(self.err(400, "FAILED_PRECONDITION", "execution_not_cancellable"), FailedPreconditionError)
        self.assertIsInstance(self.err(400, "INVALID_ARGUMENT", "invalid_arguments"), InvalidRequestError)
        self.assertIsInstance(self.err(405, "UNIMPLEMENTED", "method_not_allowed"), NotFoundError)
        disabled = self.err(503, "UNAVAILABLE", "execution_disabled")
        self.assertIsInstance(disabled, ExecutionDisabledError)
        self.assertFalse(disabled.retryable)
        self.assertTrue(self.err(503, "UNAVAILABLE", "service_unavailable").retryable)
        html = error_from_response(502, None, {})
        self.assertIsInstance(html, ServiceUnavailableError)
        self.assertEqual((html.code, html.error_status, html.request_id), ("http_502", "", None))
        e = self.err(429, "RESOURCE_EXHAUSTED", "monthly_cap_exceeded")
        self.assertEqual(str(e), (
            "monthly cap reached: the submit would take the project past its monthly cap (monthly_cap_exceeded, HTTP 429, request req_1)"
        ))
        self.assertEqual(e.details, {"retryable": False})

    def test_a_submit_may_have_been_accepted_unless_the_gateway_refused_it(self) -> None:
        # the gateway answers a 4xx or 503 execution_disabled only after finding no execution
        # bound to the key; the rate limit comes before that lookup
        cases = [
            (self.err(500, "INTERNAL", "internal_error"), True),
            (self.err(503, "UNAVAILABLE", "service_unavailable"), True),
            (error_from_response(502, None, {}), True),
            (self.err(429, "RESOURCE_EXHAUSTED", "rate_limit_exceeded"), True),
            (TesNetworkError("no answer"), True),
            (TesError("invalid_response", "HTTP 202 without JSON"), True),
            (self.err(503, "UNAVAILABLE", "execution_disabled"), False),
            (self.err(429, "RESOURCE_EXHAUSTED", "insufficient_balance"), False),
            (self.err(400, "FAILED_PRECONDITION", "price_version_mismatch"), False),
            (self.err(409, "ALREADY_EXISTS", "idempotency_key_reused"), False),
        ]
        for err, accepted in cases:
            self.assertEqual((err.idempotency_key, err.may_have_been_accepted), (None, False))
            mark_submit_error(err, "key-12345")
            self.assertEqual((err.code, err.idempotency_key, err.may_have_been_accepted), (err.code, "key-12345", accepted))
        # one that names its accepted execution is known
        named = TesAbortError("exe_1")
        mark_submit_error(named, "key-12345")
        self.assertEqual((named.idempotency_key, named.may_have_been_accepted), ("key-12345", False))

    def test_retry_after(self) -> None:
        self.assertEqual(parse_retry_after("5"), 5)
        self.assertIsNone(parse_retry_after(None))
        self.assertIsNone(parse_retry_after("soon"))
        self.assertEqual(parse_retry_after("Wed, 21 Oct 2026 07:28:10 GMT", now=1792567680.0), 10)
        self.assertEqual(parse_retry_after("Wed, 21 Oct 2026 07:28:00 GMT", now=1792567690.0), 0)


class SmallPartsTest(unittest.TestCase):
    def test_mime_types(self) -> None:
        self.assertEqual(detect_mime_type(b"\x89PNG\r\n\x1a\n...."), "image/png")
        self.assertEqual(detect_mime_type(b"\xff\xd8\xff\xe0"), "image/jpeg")
        self.assertEqual(detect_mime_type(b"RIFF\0\0\0\0WAVEfmt "), "audio/wav")
        self.assertEqual(detect_mime_type(b"\0\0\0\x18ftypmp42"), "video/mp4")
        self.assertEqual(detect_mime_type(b"ID3\x04"), "audio/mpeg")
        self.assertEqual(detect_mime_type(b"????", "a.MP3"), "audio/mpeg")
        self.assertIsNone(detect_mime_type(b"hello"))

    def test_idempotency_keys(self) -> None:
        key = new_idempotency_key()
        self.assertTrue(key.startswith("tes-") and is_valid_idempotency_key(key))
        self.assertNotEqual(key, new_idempotency_key())
        self.assertFalse(is_valid_idempotency_key("short"))
        self.assertFalse(is_valid_idempotency_key("has space in it"))
        self.assertFalse(is_valid_idempotency_key("ends-with-newline\n"))
        with self.assertRaises(ValueError):
            new_idempotency_key("bad prefix")

    def test_client_options(self) -> None:
        with self.assertRaises(ValueError):
            TesClient("")
        with self.assertRaises(ValueError):
            TesClient("tes_x", "http://user:pw@example.com")
        with self.assertRaises(ValueError):
            TesClient("tes_x", "ftp://example.com")
        c = TesClient("tes_secret_value", "https://api.example.com/")
        self.assertEqual(c.base_url, "https://api.example.com")
        self.assertNotIn("tes_secret_value", repr(c) + repr(c.__dict__))


NOW = datetime(2026, 11, 26, 15, 0, 0, tzinfo=timezone.utc)


def queued(position: object, estimated_start_at: object = None) -> dict:  # type: ignore[type-arg]
    """A queued execution as a server with the fair-share order sends it (only the keys read here)."""
    progress = {"completedSteps": 0, "totalSteps": 2, "currentStep": None, "queuePosition": position, "estimatedStartAt": estimated_start_at}
    return {"id": "exe_1", "status": "queued", "progress": progress}


class QueuePlaceTest(unittest.TestCase):
    """progress.queuePosition and progress.estimatedStartAt, read and put in words as the TypeScript SDK does."""

    def test_reads_the_place_of_a_queued_execution(self) -> None:
        self.assertEqual(
            queue_place(queued(3, "2026-11-26T15:00:12Z")),
            QueuePlace(3, datetime(2026, 11, 26, 15, 0, 12, tzinfo=timezone.utc)),
        )
        # the forms RFC 3339 allows, which Python 3.9's fromisoformat() does not all take
        for text in ("2026-11-26T15:00:12.5Z", "2026-11-26T15:00:12.500000001Z", "2026-11-26T16:00:12.5+01:00", "2026-11-26t15:00:12.5z"):
            place = queue_place(queued(2, text))
            assert place is not None and place.estimated_start_at is not None, text
            self.assertEqual(place.estimated_start_at, datetime(2026, 11, 26, 15, 0, 12, 500000, tzinfo=timezone.utc), text)
        self.assertEqual(queue_place(queued(1)), QueuePlace(1, None))

    def test_none_from_an_older_server_once_started_and_for_values_the_contract_does_not_allow(self) -> None:
        older = {"id": "exe_1", "status": "queued", "progress": {"completedSteps": 0, "totalSteps": 2, "currentStep": None}}
        self.assertIsNone(queue_place(older))
        for status in ("running", "waiting", "succeeded", "cancelled"):
            self.assertIsNone(queue_place({**queued(2, "2026-11-26T15:00:12Z"), "status": status}))
        for bad in (None, 0, -1, 1.5, "3", True):
            self.assertIsNone(queue_place(queued(bad)), bad)
        # a time that does not parse is no estimate; the position still stands
        for text in ("soon", "2026-02-30T15:00:00Z", "2026-11-26 15:00", 1764169212):
            self.assertEqual(queue_place(queued(2, text)), QueuePlace(2, None), text)

    def test_words_as_the_cli_shows_them(self) -> None:
        def words(position: int, in_seconds: "float | None" = None) -> str:
            at = None if in_seconds is None else NOW + timedelta(seconds=in_seconds)
            return describe_queue_place(QueuePlace(position, at), now=NOW)

        self.assertEqual(words(3, 12.4), "position 3 in line, est. start in ~12 s")
        self.assertEqual(words(1), "next in line")
        self.assertEqual(words(40), "position 40 in line")
        self.assertEqual(words(7, 89), "position 7 in line, est. start in ~89 s")
        self.assertEqual(words(7, 95), "position 7 in line, est. start in ~2 min")
        self.assertEqual(words(900, 3 * 3600), "position 900 in line, est. start in ~3 h")
        self.assertEqual(words(1, 0.2), "next in line, est. start any moment")
        self.assertEqual(words(2, -30), "position 2 in line, est. start any moment")
        soon = queue_place(queued(3, (datetime.now(timezone.utc) + timedelta(seconds=12.3)).isoformat()))
        self.assertEqual(str(soon), "position 3 in line, est. start in ~12 s")

    def test_the_fields_are_optional_keys_of_progress(self) -> None:
        self.assertEqual(Progress.__required_keys__, frozenset({"completedSteps", "totalSteps", "currentStep"}))
        self.assertEqual(Progress.__optional_keys__, frozenset({"queuePosition", "estimatedStartAt"}))


if __name__ == "__main__":
    unittest.main()
