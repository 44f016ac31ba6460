"""Upload a real PNG, run image.render to the end, download with the sha256 check."""

from __future__ import annotations

import hashlib
import os
import tempfile
import unittest

from tes_client import ArtifactIntegrityError, Execution, TesError, is_valid_idempotency_key

from tests.support import RecordingProxy, client, png


class UploadTest(unittest.TestCase):
    def test_a_png_from_a_path_and_from_bytes_is_one_file(self) -> None:
        tes = client()
        data = png(48, 32)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gradient.png")
            with open(path, "wb") as f:
                f.write(data)
            from_path = tes.upload(path)  # type detected from the bytes
        self.assertTrue(from_path["id"].startswith("file_"))
        self.assertEqual(
            (from_path["mimeType"], from_path["format"], from_path["sizeBytes"], from_path["sha256"]),
            ("image/png", "png", len(data), hashlib.sha256(data).hexdigest()),
        )
        self.assertEqual(from_path["facts"], {"kind": "image", "width": 48, "height": 32})  # measured at upload
        self.assertEqual(tes.upload(data, "image/png")["id"], from_path["id"])  # same content, same id
        self.assertEqual(tes.upload(bytearray(data))["id"], from_path["id"])
        # the uploaded file is an input a tool reads
        result = tes.run("image.transform", {"fileId": from_path["id"], "format": "jpeg"})
        self.assertEqual(result.execution["status"], "succeeded")
        self.assertEqual(result.artifacts[0].mime_type, "image/jpeg")
        self.assertEqual(result.artifacts[0].download()[:3], b"\xff\xd8\xff")

    def test_bytes_of_no_known_type_are_refused_before_sending(self) -> None:
        with self.assertRaises(TesError) as caught:
            client().upload(b"just some text")
        self.assertEqual(caught.exception.code, "unsupported_media_type")


class RunImageRenderTest(unittest.TestCase):
    def test_runs_to_the_end_and_downloads_the_png_with_its_sha256_checked(self) -> None:
        proxy = RecordingProxy()
        self.addCleanup(proxy.close)
        tes = client(base_url=proxy.url)
        before = tes.project()["balance"]["availableMicros"]
        seen: list = []
        result = tes.run("image.render", {"text": "Python", "width": 64, "height": 48, "format": "png"}, on_progress=seen.append)
        execution: Execution = result.execution
        self.assertEqual(execution["status"], "succeeded")
        self.assertEqual(seen[0]["id"], execution["id"])
        self.assertEqual(seen[-1]["status"], "succeeded")
        self.assertTrue(is_valid_idempotency_key(result.idempotency_key))
        self.assertFalse(result.replayed)
        self.assertEqual(execution["chargedMicros"], result.quote["maximumChargeMicros"])
        self.assertIsInstance(execution["chargedMicros"], int)
        submits = proxy.requests("POST", "/tools/image.render")
        self.assertEqual([(s.status, s.idempotency_key) for s in submits], [(202, result.idempotency_key)])

        [artifact] = result.artifacts
        self.assertEqual((artifact.mime_type, artifact.format), ("image/png", "png"))
        with tempfile.TemporaryDirectory() as d:
            saved = artifact.download_to(d)
            self.assertEqual(saved, os.path.join(d, f"{artifact.id}.png"))
            with open(saved, "rb") as f:
                data = f.read()
            self.assertEqual(os.listdir(d), [f"{artifact.id}.png"])  # no temporary file left
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual(len(data), artifact.size_bytes)
        self.assertEqual(hashlib.sha256(data).hexdigest(), artifact.sha256)
        self.assertEqual(tes.download(execution["id"], artifact.id), data)
        # the API gave the URL; the bytes came from object storage directly (never through the API, no key)
        self.assertEqual(len(proxy.requests("GET", f"/tools/executions/{execution['id']}/artifacts/{artifact.id}/download")), 2)
        self.assertTrue(all(s.path.startswith("/tools") for s in proxy.sent))
        self.assertEqual(tes.project()["balance"]["availableMicros"], before - execution["chargedMicros"])

    def test_a_wrong_sha256_leaves_no_file(self) -> None:
        tes = client()
        result = tes.run("image.render", {"text": "check", "width": 32, "height": 32, "format": "png"})
        artifact = result.artifacts[0]
        real = tes.download_url

        def lying(execution_id: str, artifact_id: str):  # type: ignore[no-untyped-def]
            link = real(execution_id, artifact_id)
            return {**link, "sha256": "0" * 64}

        tes.download_url = lying  # type: ignore[method-assign]
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(ArtifactIntegrityError):
                artifact.download_to(os.path.join(d, "out.png"))
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
