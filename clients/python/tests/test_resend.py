"""Safe resend: a lost answer is resent with the same key and body, and the gateway replays."""

from __future__ import annotations

import unittest
import uuid

from tes_client import IdempotencyConflictError, InsufficientBalanceError, TesNetworkError

from tests.support import RecordingProxy, client


class ResendTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = RecordingProxy()
        self.addCleanup(self.proxy.close)

    def executions_with(self, arguments: dict) -> list:
        tes = client()
        return [e for e in tes.iter_executions(tool="test.sleep", page_size=100) if e["arguments"].get("costMicrosPerStep") == arguments["costMicrosPerStep"]]

    def test_a_lost_answer_to_the_submit_is_resent_with_the_same_key_and_body(self) -> None:
        # a cost no other test uses, to find this run's executions in the list
        args = {"seconds": 0, "steps": 2, "costMicrosPerStep": 13}
        lost = []

        def lose_first_submit(s) -> bool:  # type: ignore[no-untyped-def]
            if s.method == "POST" and s.path == "/tools/test.sleep" and not lost:
                lost.append(s)
                return True
            return False

        self.proxy.lose_answer = lose_first_submit
        tes = client(base_url=self.proxy.url)
        before = tes.project()["balance"]["availableMicros"]
        result = tes.run("test.sleep", args)
        submits = self.proxy.requests("POST", "/tools/test.sleep")
        # the resend replays the one execution: 202 while it runs, 200 if it already ended (the
        # backoff before the resend can outlast a 0-second test.sleep on a busy machine)
        self.assertEqual(len(submits), 2)
        self.assertEqual(submits[0].status, "lost")
        self.assertIn(submits[1].status, (200, 202))
        self.assertEqual({s.idempotency_key for s in submits}, {result.idempotency_key})
        self.assertEqual(submits[0].body, submits[1].body)  # byte for byte
        self.assertTrue(result.replayed)
        self.assertEqual(result.execution["status"], "succeeded")
        # one execution, charged once
        self.assertEqual([e["id"] for e in self.executions_with(args)], [result.execution["id"]])
        self.assertEqual(tes.project()["balance"]["availableMicros"], before - 26)

    def test_every_answer_to_the_submit_lost_the_error_carries_the_key_and_a_rerun_with_it_is_charged_once(self) -> None:
        args = {"seconds": 0, "steps": 2, "costMicrosPerStep": 19}
        self.proxy.lose_answer = lambda s: s.method == "POST" and s.path == "/tools/test.sleep"
        tes = client(base_url=self.proxy.url)
        before = tes.project()["balance"]["availableMicros"]
        with self.assertRaises(TesNetworkError) as caught:
            tes.run("test.sleep", args)
        err = caught.exception
        submits = self.proxy.requests("POST", "/tools/test.sleep")
        self.assertEqual([s.status for s in submits], ["lost"] * 4)
        self.assertTrue(err.may_have_been_accepted)
        self.assertIsNone(err.execution_id)
        self.assertIsNotNone(err.idempotency_key)
        self.assertEqual({s.idempotency_key for s in submits}, {err.idempotency_key})
        # the first send was accepted: its execution exists
        self.assertEqual(len(self.executions_with(args)), 1)

        again = client().run("test.sleep", args, idempotency_key=err.idempotency_key)
        self.assertTrue(again.replayed)
        self.assertEqual(again.idempotency_key, err.idempotency_key)
        self.assertEqual(again.execution["status"], "succeeded")
        self.assertEqual([e["id"] for e in self.executions_with(args)], [again.execution["id"]])
        self.assertEqual(tes.project()["balance"]["availableMicros"], before - 38)

    def test_a_refused_submit_carries_the_key_and_says_it_was_not_accepted(self) -> None:
        key = f"py-refused-{uuid.uuid4()}"
        with self.assertRaises(InsufficientBalanceError) as caught:
            client("TES_POOR_API_KEY").run("test.sleep", {"seconds": 0, "steps": 1, "costMicrosPerStep": 1000}, idempotency_key=key)
        self.assertEqual((caught.exception.idempotency_key, caught.exception.may_have_been_accepted), (key, False))

    def test_the_same_key_and_body_return_the_same_execution_another_body_is_a_conflict(self) -> None:
        tes = client()
        args = {"seconds": 0, "steps": 1, "costMicrosPerStep": 17}
        quote = tes.quote("test.sleep", args)
        key = f"py-{uuid.uuid4()}"

        def submit(arguments: dict):  # type: ignore[no-untyped-def]
            return tes.submit(
                "test.sleep",
                arguments,
                price_version=quote["priceVersion"],
                maximum_charge_micros=quote["maximumChargeMicros"],
                idempotency_key=key,
            )

        first = submit(args)
        again = submit(dict(reversed(list(args.items()))))  # key order does not matter
        self.assertFalse(first.replayed)
        self.assertTrue(again.replayed)
        self.assertEqual(again.execution["id"], first.execution["id"])
        self.assertEqual(first.retry_after_seconds, 5)
        with self.assertRaises(IdempotencyConflictError) as caught:
            submit({**args, "steps": 2})
        self.assertEqual((caught.exception.status, caught.exception.code), (409, "idempotency_key_reused"))
        self.assertEqual(tes.wait(first.execution, strategy="poll")["status"], "succeeded")

    def test_no_answer_at_all_gives_up_after_the_attempts_with_a_network_error(self) -> None:
        self.proxy.lose_answer = lambda s: s.path == "/tools/project"
        with self.assertRaises(TesNetworkError) as caught:
            client(base_url=self.proxy.url).project()
        self.assertEqual(caught.exception.code, "network_error")
        self.assertEqual(len(self.proxy.requests("GET", "/tools/project")), 4)


if __name__ == "__main__":
    unittest.main()
