"""The README's and docs' command blocks, run as written against the local stack (the tests are
``test_doc_blocks.py``, the README's, and ``test_doc_blocks_guides.py``, docs/'s: two files, so that
the suite's two workers share them).

The convention: every fenced ``bash`` or ``console`` block of ``README.md`` and ``docs/*.md`` has
a marker on the line above it:

- ``<!-- doc-test: run -->``: this test runs each of its commands in a shell, from the repository's
  root, with no AWS settings in the environment (a new user's shell), and each must exit 0. A
  ``longstep local serve`` line is started in the background (the block's next lines are "another
  shell") and stopped after the block; its port (4566 as written) is swapped for a free one, so
  that parallel test runs do not collide.
- ``<!-- doc-test: aws -->``: needs an AWS account; not run.
- ``<!-- doc-test: skip (why) -->``: not run, for the reason given (placeholders, a server until Ctrl-C...).

A block with no marker fails the first test: no command block goes unchecked by accident.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from longstep_kit.local.serve import free_port
from longstep_kit.testing.wait import wait_until
from tests.local.conftest import terminate

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|console)\s*$")
MARKER = re.compile(r"^<!-- doc-test: (run|aws|skip \(.+\)) -->$")
COMMAND_TIMEOUT_SECONDS = 180


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    marker: str | None
    commands: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if not fence:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            above = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = MARKER.match(above)
            body = lines[i + 1 : end]
            if fence.group(1) == "console":  # the commands are the "$ " lines; the rest is output
                body = [line[2:] for line in body if line.startswith("$ ")]
            commands = tuple(line for line in body if line.strip() and not line.lstrip().startswith("#"))
            found.append(Block(path, i + 1, marker.group(1) if marker else None, commands))
            i = end + 1
    return found


BLOCKS = _blocks()
RUNNABLE = [b for b in BLOCKS if b.marker == "run"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's longstep and aws
    return env


def _top_level() -> set[str]:
    return {p.name for p in REPO_ROOT.iterdir()}


@dataclass(frozen=True)
class Ran:
    """A command of a block as it ran: ``problem`` is why it failed the block (None: it passed)."""

    command: str
    problem: str | None = None


def _problem(block: Block, command: str, done: subprocess.CompletedProcess) -> str | None:
    if done.returncode != 0:
        return f"{block.name}: `{command}` exited {done.returncode}:\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    if "Traceback" in done.stderr:
        return f"{block.name}: `{command}`:\n{done.stderr[-3000:]}"
    # The engine's own messages go to a log file, not the terminal (a subagents block printed 108 KB).
    if len(done.stderr) >= 4096:
        return f"{block.name}: `{command}` printed {len(done.stderr)} bytes on stderr:\n{done.stderr[:2000]}"
    return None


def run_block(block: Block, tmp_path: Path) -> list[Ran]:
    """Run each command of ``block`` in a shell from the repository's root, as a new user's shell
    would, until one fails; what ran, in order (a served line: started and ready)."""
    before = _top_level()
    port = free_port()
    servers: list[tuple[subprocess.Popen, object]] = []
    ran: list[Ran] = []
    try:
        for written in block.commands:
            command = written.replace("4566", str(port))
            if shlex.split(command, comments=True)[:3] == ["longstep", "local", "serve"]:
                servers.append(_serve(command, port, tmp_path))
                ran.append(Ran(written))
                continue
            done = subprocess.run(["bash", "-c", command], cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS)
            ran.append(Ran(written, _problem(block, command, done)))
            if ran[-1].problem:
                break
        return ran
    finally:
        for proc, log in servers:
            terminate(proc)
            log.close()  # type: ignore[attr-defined]
        # What the block wrote (report files, start inputs): the new files its commands name. Only
        # those: the other worker may be running another block, whose files are its own to remove.
        text = "\n".join(block.commands)
        for name in _top_level() - before:
            path = REPO_ROOT / name
            if path.is_file() and name in text:
                path.unlink()


def _serve(command: str, port: int, tmp: Path) -> tuple[subprocess.Popen, object]:
    """Start a ``longstep local serve`` line in the background (on ``port`` unless it names one); return once it serves."""
    ready = tmp / f"ready-{len(list(tmp.iterdir()))}.json"
    log = (tmp / f"{ready.stem}.log").open("w")  # a file: a pipe nobody reads would block the server
    argv = [*shlex.split(command, comments=True), "--ready-file", str(ready)]
    if "--port" not in argv:  # its default, 4566, is the port the block's other lines name
        argv += ["--port", str(port), "--pages-port", str(free_port())]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT, text=True)
    wait_until("the server to be ready", lambda: ready.exists() or proc.poll() is not None, 180, first_poll=0.2, max_poll=0.3)
    assert proc.poll() is None, f"`{command}` exited {proc.returncode}:\n{(tmp / f'{ready.stem}.log').read_text()[-3000:]}"
    return proc, log
