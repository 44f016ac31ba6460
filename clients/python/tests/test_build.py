"""The standard-library build backend (_build/tes_build.py): what Python < 3.11 reads of
pyproject.toml without tomllib is what tomllib reads, and the wheel carries the license."""

from __future__ import annotations

import pathlib
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "_build"))
import tes_build  # noqa: E402


class BuildBackendTest(unittest.TestCase):
    @unittest.skipIf(sys.version_info < (3, 11), "tomllib is Python 3.11+")
    def test_the_fallback_reader_reads_the_project_table_as_tomllib_does(self) -> None:
        text = (tes_build.ROOT / "pyproject.toml").read_text(encoding="utf-8")
        self.assertEqual(tes_build.parse_project_table(text), tes_build.read_project(text))

    def test_the_wheel_holds_the_package_its_types_marker_and_the_license(self) -> None:
        with tempfile.TemporaryDirectory() as out:
            name = tes_build.build_wheel(out)
            self.assertEqual(name, "tes_client-0.1.0-py3-none-any.whl")
            with zipfile.ZipFile(pathlib.Path(out) / name) as z:
                names = z.namelist()
                metadata = z.read("tes_client-0.1.0.dist-info/METADATA").decode()
        self.assertIn("tes_client/__init__.py", names)
        self.assertIn("tes_client/py.typed", names)
        self.assertIn("tes_client-0.1.0.dist-info/LICENSE", names)
        self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
        self.assertIn("License: Apache-2.0", metadata)
        self.assertIn("Requires-Python: >=3.9", metadata)
