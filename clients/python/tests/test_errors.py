"""The money 429s are raised after one send; the rate limit is waited out; 5xx are retried."""

from __future__ import annotations

import dataclasses
import unittest

from tes_client import (
    InsufficientBalanceError,
    MonthlyCapExceededError,
    QuoteAboveMaximumError,
    RateLimitedError,
    ServiceUnavailableError,
)

from tests.support import FAST_RETRY, RecordingProxy, client, error_answer


class MoneyRefusalTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = RecordingProxy()
        self.addCleanup(self.proxy.close)

    def test_insufficient_balance_is_raised_after_one_send_and_nothing_is_reserved(self) -> None:
        tes = client("TES_POOR_API_KEY", self.proxy.url)
        before = tes.project()["balance"]
        with self.assertRaises(InsufficientBalanceError) as caught:
            tes.run("test.sleep", {"seconds": 0, "steps": 1, "costMicrosPerStep": 1000})
        err = caught.exception
        self.assertEqual((err.status, err.error_status, err.code), (429, "RESOURCE_EXHAUSTED", "insufficient_balance"))
        self.assertFalse(err.retryable)
        self.assertIsNone(err.retry_after_seconds)
        assert err.details is not None
        self.assertIs(err.details.get("retryable"), False)
        self.assertIsNone(err.execution_id)
        self.assertEqual(len(self.proxy.requests("POST", "/tools/test.sleep")), 1)
        self.assertEqual(tes.project()["balance"], before)

    def test_monthly_cap_exceeded_is_raised_after_one_send(self) -> None:
        tes = client("TES_CAPPED_API_KEY", self.proxy.url)
        with self.assertRaises(MonthlyCapExceededError) as caught:
            tes.run("test.sleep", {"seconds": 0, "steps": 2, "costMicrosPerStep": 6})
        self.assertEqual(caught.exception.code, "monthly_cap_exceeded")
        self.assertEqual(len(self.proxy.requests("POST", "/tools/test.sleep")), 1)

    def test_a_quote_above_the_callers_maximum_submits_nothing(self) -> None:
        tes = client(base_url=self.proxy.url)
        with self.assertRaises(QuoteAboveMaximumError) as caught:
            tes.run("test.sleep", {"seconds": 0, "steps": 2, "costMicrosPerStep": 50}, maximum_charge_micros=99)
        self.assertEqual((caught.exception.quoted_maximum_micros, caught.exception.allowed_maximum_micros), (100, 99))
        self.assertEqual(self.proxy.requests("POST", "/tools/test.sleep"), [])


class RetryPolicyTest(unittest.TestCase):
    """The gateway's 429 rate_limit_exceeded and 503 answers, made by the proxy (the real rate
    limit would take 120 requests a minute to reach, and a real 503 an outage)."""

    def setUp(self) -> None:
        self.proxy = RecordingProxy()
        self.addCleanup(self.proxy.close)

    def first_n(self, n: int, path: str, answer):  # type: ignore[no-untyped-def]
        count = [0]

        def canned(s):  # type: ignore[no-untyped-def]
            if s.path == path and count[0] < n:
                count[0] += 1
                return answer
            return None

        return canned

    def test_a_rate_limit_is_waited_out_per_retry_after_then_the_request_succeeds(self) -> None:
        limited = error_answer(429, "RESOURCE_EXHAUSTED", "rate_limit_exceeded", {"Retry-After": "1", "RateLimit-Reset": "1"})
        self.proxy.canned = self.first_n(1, "/tools/usage", limited)
        usage = client(base_url=self.proxy.url).usage()
        self.assertEqual(usage["currency"], "usd")
        self.assertEqual([s.status for s in self.proxy.requests("GET", "/tools/usage")], ["canned", 200])

    def test_past_its_budget_the_rate_limit_is_raised_with_its_reset(self) -> None:
        limited = error_answer(429, "RESOURCE_EXHAUSTED", "rate_limit_exceeded", {"Retry-After": "30"})
        self.proxy.canned = self.first_n(5, "/tools/usage", limited)
        tes = client(base_url=self.proxy.url, retry=dataclasses.replace(FAST_RETRY, max_rate_limit_wait_seconds=10))
        with self.assertRaises(RateLimitedError) as caught:
            tes.usage()
        self.assertEqual((caught.exception.retry_after_seconds, caught.exception.reset_seconds), (30, 30))
        self.assertEqual(caught.exception.request_id, "req_canned")
        self.assertEqual(len(self.proxy.requests("GET", "/tools/usage")), 1)

    def test_a_503_is_retried_and_gives_up_after_the_attempts(self) -> None:
        unavailable = error_answer(503, "UNAVAILABLE", "service_unavailable")
        self.proxy.canned = self.first_n(2, "/tools/project", unavailable)
        self.assertTrue(client(base_url=self.proxy.url).project()["project"]["id"].startswith("prj_"))
        self.assertEqual([s.status for s in self.proxy.requests("GET", "/tools/project")], ["canned", "canned", 200])
        self.proxy.canned = self.first_n(10, "/tools/usage", unavailable)
        with self.assertRaises(ServiceUnavailableError):
            client(base_url=self.proxy.url).usage()
        self.assertEqual(len(self.proxy.requests("GET", "/tools/usage")), 4)


if __name__ == "__main__":
    unittest.main()
