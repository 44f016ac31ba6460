"""verify_webhook against a delivery the relay signed (libs/outbound, TypeScript) and the
Standard Webhooks specification's own example."""

from __future__ import annotations

import json
import unittest

from tes_client import WebhookVerificationError, verify_webhook

from tests.support import client, env

# The example of the Standard Webhooks specification (also in clients/typescript/test/webhooks.test.ts).
SPEC = {
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "timestamp": 1614265330,
    "body": '{"test": 2432232314}',
    "signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}


def spec_headers(signature: str = str(SPEC["signature"])) -> dict:
    return {"webhook-id": SPEC["id"], "webhook-timestamp": str(SPEC["timestamp"]), "webhook-signature": signature}


def at(seconds: float):  # type: ignore[no-untyped-def]
    return lambda: float(seconds)


class WebhookTest(unittest.TestCase):
    def setUp(self) -> None:
        with open(env("TES_WEBHOOK_FILE"), encoding="utf-8") as f:
            self.captured = json.load(f)

    def test_a_delivery_signed_by_the_relay_verifies(self) -> None:
        secret = self.captured["secret"]
        deliveries = self.captured["deliveries"]
        self.assertGreaterEqual(len(deliveries), 1)
        for d in deliveries:
            event = verify_webhook(secret, d["headers"], d["body"])
            self.assertEqual(event["type"], "execution.succeeded")
            self.assertEqual(event["data"]["id"], self.captured["executionId"])
            self.assertEqual(event["data"], client().execution(self.captured["executionId"]))
            # bytes work as well as text; the header names' case does not matter
            upper = {k.upper(): v for k, v in d["headers"].items()}
            self.assertEqual(verify_webhook(secret, upper, d["body"].encode("utf-8")), event)

    def test_a_changed_body_another_secret_or_an_old_delivery_is_refused(self) -> None:
        secret = self.captured["secret"]
        d = self.captured["deliveries"][0]
        sent_at = int(d["headers"]["webhook-timestamp"])
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(secret, d["headers"], d["body"].replace("succeeded", "failed", 1))
        with self.assertRaises(WebhookVerificationError):
            verify_webhook("whsec_" + "A" * 32, d["headers"], d["body"])
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(secret, d["headers"], d["body"], now=at(sent_at + 301))
        self.assertTrue(verify_webhook(secret, d["headers"], d["body"], now=at(sent_at + 299)))
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(secret, {k: v for k, v in d["headers"].items() if k != "webhook-id"}, d["body"])
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(secret[6:], d["headers"], d["body"])

    def test_the_specifications_example_and_a_rotated_signature_list(self) -> None:
        now = at(SPEC["timestamp"])
        self.assertEqual(verify_webhook(str(SPEC["secret"]), spec_headers(), str(SPEC["body"]), now=now), {"test": 2432232314})
        rotated = spec_headers(f"v1,bm90IHRoaXMgb25l v2,abc {SPEC['signature']}")
        self.assertEqual(verify_webhook(str(SPEC["secret"]), rotated, str(SPEC["body"]), now=now), {"test": 2432232314})
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(str(SPEC["secret"]), spec_headers("v1,bm90IHRoaXMgb25l"), str(SPEC["body"]), now=now)
        with self.assertRaises(WebhookVerificationError):
            verify_webhook(str(SPEC["secret"]), {**spec_headers(), "webhook-timestamp": "1614265330\n"}, str(SPEC["body"]), now=now)
        # http.server's self.headers (an email.message.Message) works as a header source
        from email.message import Message

        m = Message()
        for k, v in spec_headers().items():
            m[k] = v
        self.assertTrue(verify_webhook(str(SPEC["secret"]), m, str(SPEC["body"]), now=now))


if __name__ == "__main__":
    unittest.main()
