"""The README's example runs as written."""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import unittest

from tests.support import png

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")
#: The repository's README shows a Python example beside the TypeScript one.
REPO_README = os.path.join(HERE, "..", "..", "..", "README.md")


def run_in_temp_folder(code: str, files: dict) -> tuple:  # type: ignore[type-arg]
    """Runs example code in an empty folder holding ``files``; returns (stdout, names made)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            for name, data in files.items():
                with open(name, "wb") as f:
                    f.write(data)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
            made = sorted(set(os.listdir(d)) - set(files))
        finally:
            os.chdir(cwd)
    return out.getvalue(), made


class ReadmeTest(unittest.TestCase):
    def test_the_example_runs(self) -> None:
        with open(README, encoding="utf-8") as f:
            text = f.read()
        match = re.search(r"## Example\n\n```python\n(.*?)```", text, re.DOTALL)
        assert match is not None
        code = match.group(1)
        self.assertLessEqual(len(code.strip().splitlines()), 12)
        out, saved = run_in_temp_folder(code, {"photo.png": png(320, 200)})
        self.assertEqual(len(saved), 1)
        self.assertTrue(saved[0].startswith("art_"))
        self.assertIn("succeeded", out)
        self.assertRegex(out.strip().splitlines()[-1], r"^[0-9]+ .*art_\w+\.\w+$")

    def test_the_repository_readmes_python_example_runs(self) -> None:
        with open(REPO_README, encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("## Calling it from code") :]
        match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
        assert match is not None
        out, made = run_in_temp_folder(match.group(1), {})
        self.assertEqual(made, ["hello.png"])
        self.assertRegex(out.strip().splitlines()[-1], r"^succeeded [0-9]+$")


if __name__ == "__main__":
    unittest.main()
