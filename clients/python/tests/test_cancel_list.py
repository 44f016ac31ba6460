"""Cancel a running test.sleep; list executions with filters and pages."""

from __future__ import annotations

import unittest
import uuid

from tes_client import ExecutionUnsuccessfulError, FailedPreconditionError, InvalidRequestError

from tests.support import client


class CancelTest(unittest.TestCase):
    def test_a_running_sleep_is_cancelled_and_charged_only_its_completed_steps(self) -> None:
        tes = client()
        args = {"seconds": 0.5, "steps": 6, "costMicrosPerStep": 100}
        quote = tes.quote("test.sleep", args)
        submitted = tes.submit(
            "test.sleep",
            args,
            price_version=quote["priceVersion"],
            maximum_charge_micros=quote["maximumChargeMicros"],
            idempotency_key=f"py-cancel-{uuid.uuid4()}",
        )
        execution_id = submitted.execution["id"]
        with tes.events(execution_id) as stream:
            for e in stream:
                if e["progress"]["completedSteps"] >= 1:
                    break
        cancelled = tes.cancel(execution_id)
        self.assertTrue(cancelled["cancelRequested"])
        self.assertIn(cancelled["status"], ("running", "waiting", "cancelled"))
        done = tes.wait(execution_id)
        self.assertEqual(done["status"], "cancelled")
        completed = [s for s in done["steps"] if s["status"] == "succeeded"]
        self.assertGreaterEqual(len(completed), 1)
        self.assertLess(len(completed), 6)
        self.assertEqual(done["chargedMicros"], 100 * len(completed))
        self.assertLessEqual(done["chargedMicros"], done["reservedMicros"])
        # cancelling again is harmless; a finished execution is not cancellable
        self.assertEqual(tes.cancel(execution_id)["status"], "cancelled")
        finished = tes.run("test.sleep", {"seconds": 0, "steps": 1, "costMicrosPerStep": 1}).execution
        with self.assertRaises(FailedPreconditionError) as caught:
            tes.cancel(finished["id"])
        self.assertEqual(caught.exception.code, "execution_not_cancellable")

    def test_run_raises_execution_unsuccessful_with_the_charge_when_it_fails(self) -> None:
        tes = client()
        with self.assertRaises(ExecutionUnsuccessfulError) as caught:
            tes.run("test.sleep", {"seconds": 0, "steps": 3, "costMicrosPerStep": 4, "failAtStep": 1})
        err = caught.exception
        self.assertEqual(err.execution["status"], "failed")
        self.assertEqual(err.execution_id, err.execution["id"])
        self.assertEqual(err.code, err.execution["errorCode"])
        self.assertLessEqual(err.execution["chargedMicros"], err.execution["reservedMicros"])


class ListTest(unittest.TestCase):
    def test_filters_and_pages(self) -> None:
        tes = client()
        made = [tes.run("test.sleep", {"seconds": 0, "steps": 1, "costMicrosPerStep": 1}).execution["id"] for _ in range(3)]
        page = tes.executions(tool="test.sleep", status="succeeded", limit=2)
        self.assertEqual(len(page["data"]), 2)
        self.assertTrue(page["hasMore"])
        self.assertEqual(page["nextBefore"], page["data"][-1]["id"])
        self.assertEqual([e["id"] for e in page["data"]], list(reversed(made))[:2])  # newest first
        self.assertTrue(all(e["tool"] == "test.sleep" and e["status"] == "succeeded" for e in page["data"]))
        following = tes.executions(tool="test.sleep", status="succeeded", limit=2, before=page["nextBefore"])
        self.assertEqual(following["data"][0]["id"], made[0])
        every = [e["id"] for e in tes.iter_executions(tool="test.sleep", status="succeeded", page_size=2)]
        self.assertEqual(every[:3], list(reversed(made)))
        self.assertEqual(len(every), len(set(every)))
        self.assertEqual(tes.executions(tool="image.render", status="cancelled")["data"], [])
        with self.assertRaises(InvalidRequestError) as caught:
            tes.executions(status="finished")
        self.assertEqual(caught.exception.code, "invalid_request")


if __name__ == "__main__":
    unittest.main()
