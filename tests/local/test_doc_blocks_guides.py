"""The docs' command blocks (``docs/*.md``), run as written (``tests/local/doc_blocks.py`` states the
convention; the README's are ``test_doc_blocks.py``'s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.local.doc_blocks import RUNNABLE, run_block

GUIDE_BLOCKS = [b for b in RUNNABLE if b.path.name != "README.md"]


@pytest.mark.parametrize("block", GUIDE_BLOCKS, ids=[b.name for b in GUIDE_BLOCKS])
def test_the_block_runs_as_written(block, tmp_path: Path):
    ran = run_block(block, tmp_path)
    assert [r.problem for r in ran if r.problem] == []
    assert [r.command for r in ran] == list(block.commands)  # every command ran, none was skipped
