"""The build backend of tes-client (PEP 517, PEP 660), standard library only.

Why our own: `pip install --no-index clients/python` must work on a machine without a package
registry (issue #29). With setuptools as the backend, pip's build isolation fetches
`setuptools>=61` from the registry and fails, and without isolation setuptools < 70.1 still needs
the `wheel` package, which a fresh venv (and pyenv's Python) lacks. A pure-Python package with no
dependencies needs none of that: a wheel is a zip with three metadata files. `requires = []` in
pyproject.toml, so pip installs with or without build isolation and without a registry.

It reads the [project] table of pyproject.toml (tomllib on Python 3.11+; before that a reader
of the few TOML forms that table uses) and packs `tes_client/` (no __pycache__).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import pathlib
import re
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "tes_client"
# Fixed timestamps, so the same sources always give the same bytes.
ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def read_project(text: Optional[str] = None) -> Dict[str, Any]:
    """The [project] table of pyproject.toml."""
    if text is None:
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ImportError:
        return parse_project_table(text)
    return dict(tomllib.loads(text)["project"])


_KEY = re.compile(r"^([A-Za-z0-9_-]+)\s*=\s*(.*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _strings(value: str) -> List[str]:
    return [s.encode("latin-1", "backslashreplace").decode("unicode_escape") for s in _STRING.findall(value)]


def parse_project_table(text: str) -> Dict[str, Any]:
    """The [project] table from the TOML forms pyproject.toml uses there: "strings", arrays of
    strings (over several lines) and inline tables of strings. Python < 3.11 has no tomllib;
    a test checks this reads the same as tomllib."""
    project: Dict[str, Any] = {}
    inside = False
    pending: Optional[Tuple[str, str]] = None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if pending is not None:
            key, acc = pending
            acc += " " + line
            if "]" in line:
                project[key] = _strings(acc)
                pending = None
            else:
                pending = (key, acc)
            continue
        if line.startswith("["):
            inside = line == "[project]"
            continue
        match = _KEY.match(line) if inside else None
        if not match:
            continue
        key, value = match.group(1), match.group(2).strip()
        if value.startswith("["):
            if "]" in value:
                project[key] = _strings(value)
            else:
                pending = (key, value)
        elif value.startswith("{"):
            pairs = re.findall(r'([A-Za-z0-9_-]+)\s*=\s*"((?:[^"\\]|\\.)*)"', value)
            project[key] = {k: v for k, v in pairs}
        else:
            project[key] = _strings(value)[0]
    return project


def _dist_name(project: Dict[str, Any]) -> str:
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def metadata_text(project: Dict[str, Any]) -> str:
    """Core metadata 2.1 (METADATA and PKG-INFO), the README as its long description."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
    ]
    license_ = project.get("license")
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    for url_name, url in (project.get("urls") or {}).items():
        lines.append(f"Project-URL: {url_name}, {url}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown")
        body = (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def _package_files() -> List[pathlib.Path]:
    files = [p for p in sorted((ROOT / PACKAGE).rglob("*")) if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return files


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, entries: List[Tuple[str, bytes]]) -> str:
    project = read_project()
    dist = _dist_name(project)
    info = f"{dist}-{project['version']}.dist-info"
    wheel_meta = "Wheel-Version: 1.0\nGenerator: tes_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries = entries + [
        (f"{info}/METADATA", metadata_text(project).encode("utf-8")),
        (f"{info}/WHEEL", wheel_meta.encode()),
        (f"{info}/LICENSE", (ROOT / "LICENSE").read_bytes()),
    ]
    record = "\n".join(_record_line(n, d) for n, d in entries) + f"\n{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))
    name = f"{dist}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for entry, data in entries:
            info_ = zipfile.ZipInfo(entry, ZIP_DATE)
            info_.external_attr = 0o644 << 16
            info_.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info_, data)
    return name


# --- PEP 517 -------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Any = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Any = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Any = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Any = None, metadata_directory: Optional[str] = None) -> str:
    return _write_wheel(wheel_directory, [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in _package_files()])


def build_editable(wheel_directory: str, config_settings: Any = None, metadata_directory: Optional[str] = None) -> str:
    """PEP 660: a .pth file that puts this folder on sys.path, so edits take effect at once."""
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", f"{ROOT}\n".encode())])


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    project = read_project()
    base = f"{_dist_name(project)}-{project['version']}"
    members = [ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "LICENSE", ROOT / "_build" / "tes_build.py", *_package_files()]
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = metadata_text(project).encode("utf-8")
        entries = [(f"{base}/PKG-INFO", pkg_info)] + [(f"{base}/{p.relative_to(ROOT).as_posix()}", p.read_bytes()) for p in members]
        for entry, data in entries:
            info = tarfile.TarInfo(entry)
            info.size = len(data)
            info.mtime = 1767225600
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return name
