"""Catalog, quotes, the account, and the typed errors of bad requests, against the real stack."""

from __future__ import annotations

import unittest

from tes_client import AuthenticationError, InvalidRequestError, NotFoundError, TesApiError, TesClient

from tests.support import BASE_URL, client


class CatalogTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tes = client()

    def test_catalog_lists_the_tools_with_prices_in_micros(self) -> None:
        catalog = self.tes.tools()
        self.assertEqual(catalog["currency"], "usd")
        self.assertTrue(catalog["priceVersion"])
        names = {t["name"]: t for t in catalog["tools"]}
        self.assertIn("image.render", names)
        self.assertIn("test.sleep", names)
        render = names["image.render"]
        self.assertEqual(render["inputSchema"]["type"], "object")
        price = render["price"]
        assert price is not None
        self.assertIsInstance(price["minimumMicros"], int)

    def test_quote_is_free_and_in_integer_micros(self) -> None:
        before = self.tes.project()["balance"]
        quote = self.tes.quote("test.sleep", {"seconds": 0, "steps": 3, "costMicrosPerStep": 7})
        self.assertEqual((quote["tool"], quote["maximumChargeMicros"], quote["currency"]), ("test.sleep", 21, "usd"))
        self.assertIsInstance(quote["maximumChargeMicros"], int)
        self.assertEqual(quote["priceVersion"], self.tes.tools()["priceVersion"])
        self.assertEqual(self.tes.project()["balance"], before)

    def test_bad_arguments_are_a_typed_error_with_the_schema_problems(self) -> None:
        with self.assertRaises(InvalidRequestError) as caught:
            self.tes.quote("image.render", {"txet": 42})
        err = caught.exception
        self.assertEqual((err.status, err.error_status, err.code), (400, "INVALID_ARGUMENT", "invalid_arguments"))
        self.assertIsNotNone(err.request_id)
        assert err.details is not None
        self.assertIsInstance(err.details.get("errors"), list)
        self.assertFalse(err.retryable)
        with self.assertRaises(NotFoundError) as unknown:
            self.tes.quote("image.rendr", {"text": "x"})
        self.assertEqual(unknown.exception.code, "tool_not_found")
        with self.assertRaises(ValueError):
            self.tes.submit("test.sleep", {}, price_version="p", maximum_charge_micros=1, idempotency_key="no")
        with self.assertRaises(TypeError):
            self.tes.submit("test.sleep", {}, price_version="p", maximum_charge_micros=1.5, idempotency_key="key-12345")  # type: ignore[arg-type]

    def test_a_wrong_key_is_an_authentication_error_that_does_not_echo_the_key(self) -> None:
        secret = "tes_abcdefgh_" + "x" * 32
        with self.assertRaises(AuthenticationError) as caught:
            TesClient(secret, BASE_URL).tools()
        self.assertEqual(caught.exception.status, 401)
        self.assertIn(caught.exception.code, ("platform_api_key_invalid", "platform_api_key_missing"))
        self.assertNotIn(secret, str(caught.exception))

    def test_project_and_usage(self) -> None:
        project = self.tes.project()
        self.assertTrue(project["project"]["id"].startswith("prj_"))
        self.assertIn("tools:execute", project["key"]["scopes"])
        self.assertIsInstance(project["balance"]["availableMicros"], int)
        self.assertGreater(project["balance"]["availableMicros"], 0)
        usage = self.tes.usage()
        self.assertEqual(usage["currency"], "usd")
        self.assertIsInstance(usage["chargedMicros"], int)
        self.assertGreaterEqual(usage["requestCount"], 0)

    def test_an_unknown_execution_is_not_found(self) -> None:
        with self.assertRaises(TesApiError) as caught:
            self.tes.execution("exe_01JD3Z8X4V6W2Q9R7T5Y1M3N8K")
        self.assertIsInstance(caught.exception, NotFoundError)
        self.assertEqual(caught.exception.code, "execution_not_found")


if __name__ == "__main__":
    unittest.main()
