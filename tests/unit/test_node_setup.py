"""Node.js at setup and at synth: ``make node-version`` says in one line what a too-old Node.js
means, and jsii's relay of the Node process's stderr prints text, never a bytes repr."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longstep_kit import jsii_relay

ROOT = Path(__file__).resolve().parents[2]


def _node_version_check(tmp_path: Path, version: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "node"
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["make", "-s", "--no-print-directory", "node-version"], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.parametrize("version", ["v22.3.0", "v24.11.1"])
def test_a_supported_node_passes_setup_silently(tmp_path, version):
    done = _node_version_check(tmp_path, version)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_node_20_gets_one_line_and_setup_goes_on(tmp_path):
    done = _node_version_check(tmp_path, "v20.20.2")
    assert done.returncode == 0
    (line,) = done.stderr.splitlines()
    assert "v20.20.2" in line and "22 or 24" in line


def test_an_older_node_stops_setup_with_one_line(tmp_path):
    done = _node_version_check(tmp_path, "v18.19.0")
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert lines == ["Node.js v18.19.0 is too old: install Node.js 22 or 24 (README, Quick start)"]


def test_the_sink_writes_plain_lines_as_text_and_console_messages_decoded(monkeypatch):
    err, out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "stdout", out)
    reader = io.BytesIO(
        b"!!  Node 20 is end-of-life  !!\n"
        + json.dumps({"stderr": base64.b64encode(b"from js\n").decode()}).encode()
        + b"\n"
        + json.dumps({"stdout": base64.b64encode(b"to stdout\n").decode()}).encode()
        + b"\n"
        + b"\xff not utf-8\n"
    )
    jsii_relay.stderr_sink(reader)
    err.flush(), out.flush()
    written = err.buffer.getvalue().decode("utf-8")
    assert written == "!!  Node 20 is end-of-life  !!\nfrom js\n\ufffd not utf-8\n"
    assert "b'" not in written
    assert out.buffer.getvalue() == b"to stdout\n"


def test_importing_the_app_module_installs_the_sink_before_the_cdk_starts():
    from jsii._kernel.providers import process

    import longstep_kit.app  # noqa: F401

    assert process.stderr_sink is jsii_relay.stderr_sink


def test_a_node_warning_at_synth_reads_as_text():
    # The CDK app's first import, with jsii's banners not silenced: whatever Node.js prints (on
    # Node.js 20, the end-of-life banner) comes out as text.
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_WARNING")}
    done = subprocess.run(
        [sys.executable, "-c", "import longstep_kit.app, aws_cdk; aws_cdk.App()"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "b'" not in done.stderr
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    if int(node.lstrip("v").split(".")[0]) < 22:
        assert f"Node {node.lstrip('v').split('.')[0]} is end-of-life" in done.stderr
