"""A wheel of the installed Longstep, for projects that ``longstep init`` writes.

Longstep is not on a package index: a new project carries the kit as a wheel in ``vendor/`` and
installs it from there. The wheel is built from the packages this interpreter imports (an
editable checkout or an installed wheel alike), with the installed distribution's metadata
(version, dependencies and extras), so the project gets exactly the kit that made it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import zipfile
from pathlib import Path

DISTRIBUTION = "longstep"
PACKAGES = ("longstep", "longstep_functions", "longstep_kit")
_SKIP_SUFFIXES = (".pyc", ".tmp")


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _package_files(name: str) -> list[tuple[str, Path]]:
    module = __import__(name)
    root = Path(module.__file__).resolve().parent
    return [
        (f"{name}/{path.relative_to(root).as_posix()}", path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(_SKIP_SUFFIXES)
    ]


def _metadata(version: str) -> str:
    dist = importlib.metadata.distribution(DISTRIBUTION)
    lines = ["Metadata-Version: 2.1", f"Name: {DISTRIBUTION}", f"Version: {version}"]
    if dist.metadata.get("Summary"):
        lines.append(f"Summary: {dist.metadata['Summary']}")
    if dist.metadata.get("Requires-Python"):
        lines.append(f"Requires-Python: {dist.metadata['Requires-Python']}")
    lines += [f"Provides-Extra: {extra}" for extra in dist.metadata.get_all("Provides-Extra") or []]
    lines += [f"Requires-Dist: {req}" for req in dist.requires or []]
    return "\n".join(lines) + "\n"


def build_wheel(target_dir: Path) -> Path:
    """Write ``longstep-<version>-py3-none-any.whl`` into ``target_dir``; returns its path."""
    version = importlib.metadata.version(DISTRIBUTION)
    dist_info = f"{DISTRIBUTION}-{version}.dist-info"
    entries: list[tuple[str, bytes]] = [(arc, path.read_bytes()) for name in PACKAGES for arc, path in _package_files(name)]
    entries.append((f"{dist_info}/METADATA", _metadata(version).encode()))
    entries.append((f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: longstep_kit.wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    entries.append((f"{dist_info}/entry_points.txt", b"[console_scripts]\nlongstep = longstep_kit.cli:main\n"))
    record = "".join(f"{arc},{_record_hash(data)},{len(data)}\n" for arc, data in entries) + f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode()))
    target_dir.mkdir(parents=True, exist_ok=True)
    wheel = target_dir / f"{DISTRIBUTION}-{version}-py3-none-any.whl"
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
            zf.writestr(zipfile.ZipInfo(arc, date_time=(2020, 1, 1, 0, 0, 0)), data, compress_type=zipfile.ZIP_DEFLATED)
    tmp.replace(wheel)
    return wheel
