"""The synthesized-assembly cache: an assembly another process may be running from is never pruned."""

from __future__ import annotations

import os
import time

from longstep_kit.local import synth


def _assembly(cache, name: str, age_seconds: float) -> None:
    path = cache / name
    path.mkdir()
    (path / synth.COMPLETE).write_text(name)
    then = time.time() - age_seconds
    os.utime(path, (then, then))


def test_prune_keeps_the_recent_and_the_recently_used_and_removes_only_the_idle(tmp_path):
    for i in range(3):
        _assembly(tmp_path, f"recent{i}", age_seconds=i)  # the 3 most recently used
    for i in range(4):
        _assembly(tmp_path, f"in-use{i}", age_seconds=600 + i)  # past `keep`, but used minutes ago
    for i in range(5):
        _assembly(tmp_path, f"idle{i}", age_seconds=3 * 86_400 + i)  # past `keep` and idle for days
    (tmp_path / "staging.tmp").mkdir()  # not complete: another process is still writing it

    synth._prune(tmp_path, keep=3)

    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([f"recent{i}" for i in range(3)] + [f"in-use{i}" for i in range(4)] + ["staging.tmp"])
