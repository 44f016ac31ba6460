"""Following an execution: the event stream, Prefer: wait, polling, and the fallbacks between them."""

from __future__ import annotations

import time
import unittest

from tes_client import StreamUnavailableError, TesAbortError, TesNetworkError

from tests.support import RecordingProxy, client


def sleep_args(seconds: float, steps: int, cost: int = 2) -> dict:
    return {"seconds": seconds, "steps": steps, "costMicrosPerStep": cost}


class FollowTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proxy = RecordingProxy()
        self.addCleanup(self.proxy.close)

    def gets_of(self, execution_id: str) -> list:
        return [s for s in self.proxy.requests("GET", f"/tools/executions/{execution_id}") if s.path == f"/tools/executions/{execution_id}"]

    def test_auto_follows_the_stream_and_sees_every_step_without_polling(self) -> None:
        seen: list = []
        result = client(base_url=self.proxy.url).run("test.sleep", sleep_args(0.3, 3), on_progress=seen.append)
        execution_id = result.execution["id"]
        self.assertEqual(result.execution["status"], "succeeded")
        completed = []
        for e in seen:
            if e["progress"]["completedSteps"] not in completed:
                completed.append(e["progress"]["completedSteps"])
        self.assertEqual(completed, [0, 1, 2, 3])
        streams = self.proxy.requests("GET", f"/tools/executions/{execution_id}/events")
        self.assertEqual([s.status for s in streams], [200])
        self.assertEqual(self.gets_of(execution_id), [])
        self.assertIsNone(self.proxy.requests("POST", "/tools/test.sleep")[0].prefer)

    def test_wait_strategy_holds_the_submit_and_a_short_run_is_one_request(self) -> None:
        result = client(base_url=self.proxy.url).run("test.sleep", sleep_args(0.2, 2), strategy="wait")
        self.assertEqual(result.execution["status"], "succeeded")
        [submit] = self.proxy.requests("POST", "/tools/test.sleep")
        self.assertEqual((submit.prefer, submit.status), ("wait=30", 200))
        self.assertEqual(self.gets_of(result.execution["id"]), [])
        self.assertEqual(self.proxy.requests("GET", f"/tools/executions/{result.execution['id']}/events"), [])

    def test_without_a_stream_and_with_prefer_ignored_auto_falls_back_to_waits_then_polls(self) -> None:
        self.proxy.no_stream = True
        self.proxy.ignore_prefer = True
        seen: list = []
        result = client(base_url=self.proxy.url).run("test.sleep", sleep_args(0.5, 4), on_progress=seen.append)
        self.assertEqual(result.execution["status"], "succeeded")
        execution_id = result.execution["id"]
        self.assertEqual([s.status for s in self.proxy.requests("GET", f"/tools/executions/{execution_id}/events")], ["canned"])
        prefers = [s.prefer for s in self.gets_of(execution_id)]
        # three waits the server ignored (answered at once), then plain polls until the end
        self.assertEqual(prefers[:3], ["wait=30"] * 3)
        self.assertGreaterEqual(len(prefers), 4)
        self.assertEqual(set(prefers[3:]), {None})
        self.assertEqual(seen[-1]["status"], "succeeded")

    def test_a_stream_held_back_by_a_buffering_proxy_falls_back_to_prefer_wait(self) -> None:
        self.proxy.hold_streams = True
        tes = client(base_url=self.proxy.url)
        started = time.monotonic()
        result = tes.run("test.sleep", sleep_args(0.5, 4), first_event_timeout_seconds=1)
        self.assertEqual(result.execution["status"], "succeeded")
        self.assertLess(time.monotonic() - started, 20)
        execution_id = result.execution["id"]
        waits = self.gets_of(execution_id)
        self.assertGreaterEqual(len(waits), 1)
        self.assertEqual({s.prefer for s in waits}, {"wait=30"})

    def test_strategy_stream_raises_when_the_stream_is_unusable(self) -> None:
        self.proxy.no_stream = True
        tes = client(base_url=self.proxy.url)
        with self.assertRaises(Exception) as caught:
            tes.run("test.sleep", sleep_args(0, 1), strategy="stream")
        self.assertEqual(getattr(caught.exception, "status", None), 404)
        execution_id = getattr(caught.exception, "execution_id", None)
        self.assertIsNotNone(execution_id)
        self.assertEqual(tes.wait(str(execution_id), strategy="poll")["status"], "succeeded")
        self.proxy.no_stream = False
        self.proxy.hold_streams = True
        with self.assertRaises(StreamUnavailableError) as held:
            tes.run("test.sleep", sleep_args(1, 2), strategy="stream", first_event_timeout_seconds=0.5)
        held_id = held.exception.execution_id
        assert held_id is not None
        self.assertEqual(client().wait(held_id)["status"], "succeeded")

    def test_poll_strategy_polls_at_the_interval(self) -> None:
        started = time.monotonic()
        result = client(base_url=self.proxy.url, poll_interval_seconds=0.3).run("test.sleep", sleep_args(0.4, 2), strategy="poll")
        self.assertEqual(result.execution["status"], "succeeded")
        # the submit's 202 said Retry-After: 5, which the first poll honours over the 0.3 s interval
        self.assertGreaterEqual(time.monotonic() - started, 5)
        gets = self.gets_of(result.execution["id"])
        self.assertGreaterEqual(len(gets), 1)
        self.assertEqual({s.prefer for s in gets}, {None})
        self.assertEqual(self.proxy.requests("GET", f"/tools/executions/{result.execution['id']}/events"), [])

    def test_events_iterates_changes_and_resumes_after_the_last_event_id(self) -> None:
        tes = client()
        args = sleep_args(0.3, 2)
        quote = tes.quote("test.sleep", args)
        submitted = tes.submit(
            "test.sleep",
            args,
            price_version=quote["priceVersion"],
            maximum_charge_micros=quote["maximumChargeMicros"],
            idempotency_key=f"py-events-{time.time_ns()}",
        )
        execution_id = submitted.execution["id"]
        with tes.events(execution_id) as stream:
            statuses = [e["status"] for e in stream]
            last = stream.last_event_id
        self.assertEqual(statuses[-1], "succeeded")
        self.assertEqual(statuses.count("succeeded"), 1)
        self.assertIsNotNone(last)
        # resumed after the terminal event: the gateway has nothing more to say; the client looks
        resumed = list(tes.events(execution_id, last_event_id=last))
        self.assertEqual([e["status"] for e in resumed], ["succeeded"])
        stream2 = tes.events(execution_id)
        iter(stream2)
        with self.assertRaises(TypeError):
            iter(stream2)  # iterated once
        stream2.close()

    def test_a_timeout_raises_an_abort_error_naming_the_execution_which_goes_on(self) -> None:
        tes = client()
        args = sleep_args(4, 2, cost=1)
        quote = tes.quote("test.sleep", args)
        submitted = tes.submit(
            "test.sleep",
            args,
            price_version=quote["priceVersion"],
            maximum_charge_micros=quote["maximumChargeMicros"],
            idempotency_key=f"py-timeout-{time.time_ns()}",
        )
        execution_id = submitted.execution["id"]
        for strategy in ("auto", "poll"):
            started = time.monotonic()
            with self.assertRaises(TesAbortError) as caught:
                tes.wait(execution_id, strategy=strategy, timeout=1)
            self.assertLess(time.monotonic() - started, 3.5)
            self.assertEqual((caught.exception.code, caught.exception.execution_id), ("aborted", execution_id))
        self.assertIn(tes.execution(execution_id)["status"], ("queued", "running"))
        tes.cancel(execution_id)
        self.assertEqual(tes.wait(execution_id, timeout=60)["status"], "cancelled")
        # run() names the execution it submitted when its timeout runs out
        with self.assertRaises(TesAbortError) as during_run:
            tes.run("test.sleep", sleep_args(6, 2, cost=1), timeout=4)
        ran_id = during_run.exception.execution_id
        assert ran_id is not None
        tes.cancel(ran_id)
        self.assertEqual(tes.wait(ran_id, timeout=60)["status"], "cancelled")

    def test_a_stream_to_nowhere_is_a_network_error(self) -> None:
        tes = client(base_url="http://127.0.0.1:9")  # discard port: nothing listens
        with self.assertRaises(TesNetworkError):
            list(tes.events("exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K"))


if __name__ == "__main__":
    unittest.main()
