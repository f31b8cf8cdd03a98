"""``python -m bench.storage --merge``: another run's session lengths join the document whose goals
are checked and whose report is written (the 1,000-turn Longstep run is made alone)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.storage.run import merged


def _doc(turns: str, nbytes: int) -> dict:
    return {
        "results": {turns: {"longstep": {"bytes": nbytes}}},
        "sessions": {turns: {"floor_bytes": nbytes // 2}},
        "direct_command": f".venv/bin/python -m bench.storage --turns {turns}",
        "runtime": {"commit": "abc1234", "sha256": "f" * 16},
        "wall_seconds": 1.0,
    }


def test_a_length_the_document_lacks_is_added_and_one_it_has_is_kept(tmp_path: Path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**_doc("1000", 3_000), "results": {"1000": {"longstep": {"bytes": 3_000}}, "200": {"longstep": {"bytes": 1}}}}))
    document = merged(_doc("200", 700), [other])
    assert document["results"]["200"] == {"longstep": {"bytes": 700}}  # this run's, not the other's
    assert document["results"]["1000"] == {"longstep": {"bytes": 3_000}} and document["sessions"]["1000"] == {"floor_bytes": 1_500}
    (entry,) = document["merged"]
    assert entry["turns"] == ["1000"] and entry["runtime"]["commit"] == "abc1234" and entry["file"] == str(other)
    # Merging again (``--render-only --merge``) takes the file's results again and names it once.
    other.write_text(json.dumps({**_doc("1000", 2_900)}))
    again = merged(document, [other])
    assert again["results"]["1000"] == {"longstep": {"bytes": 2_900}} and [m["turns"] for m in again["merged"]] == [["1000"]]
