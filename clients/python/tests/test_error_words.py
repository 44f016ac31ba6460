"""Errors people can read (issue #29): one line with the amounts and limits, the same words as
the TypeScript SDK's (tests/error_sentences.json holds the cases both are checked against)."""

from __future__ import annotations

import json
import pathlib
import sys
import traceback
import unittest

from tes_client import InvalidRequestError, error_from_response

CASES = json.loads((pathlib.Path(__file__).parent / "error_sentences.json").read_text(encoding="utf-8"))["cases"]


def answer(case: dict) -> BaseException:
    body = {"error": {"status": case["errorStatus"], "message": case["code"]}}
    if "details" in case:
        body["error"]["details"] = case["details"]
    headers = {"x-request-id": "req_1"}
    if "retryAfter" in case:
        headers["retry-after"] = case["retryAfter"]
    return error_from_response(case["status"], body, headers)


class ErrorWordsTest(unittest.TestCase):
    def test_every_case_reads_as_its_sentence(self) -> None:
        for case in CASES:
            with self.subTest(code=case["code"]):
                self.assertEqual(str(answer(case)), case["message"])

    def test_an_uncaught_validation_error_shows_every_problem(self) -> None:
        err = error_from_response(
            400,
            {
                "error": {
                    "status": "INVALID_ARGUMENT",
                    "message": "invalid_arguments",
                    "details": {
                        "errors": [
                            {"instancePath": "/slides/0", "message": "must NOT have additional properties", "params": {"additionalProperty": "txt"}},
                            {"instancePath": "/format", "message": "must be equal to one of the allowed values", "params": {"allowedValues": ["png", "jpeg"]}},
                        ]
                    },
                }
            },
            {"x-request-id": "req_1"},
        )
        self.assertIsInstance(err, InvalidRequestError)
        printed = "".join(traceback.format_exception(type(err), err, None))
        self.assertIn("InvalidRequestError: invalid arguments: slides[0] must NOT have additional properties: txt", printed)
        self.assertIn("format must be equal to one of the allowed values: png, jpeg", printed)
        self.assertNotIn("\n", str(err))
        self.assertIn("details=", repr(err))
        if sys.version_info >= (3, 11):
            # each problem on a line of its own under the traceback (PEP 678 notes)
            self.assertIn("\n  format must be equal to one of the allowed values: png, jpeg", printed)
