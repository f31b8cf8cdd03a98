"""jsii's relay of the Node.js process's stderr, as text.

jsii (the bridge between the Python CDK and its Node.js runtime) forwards what the Node process
writes to stderr; a line that is not one of its JSON console messages (Node's own warnings, the
CDK's end-of-life banner) it prints with ``print(line)`` on the raw bytes, so the user reads
``b'!!  Node 20 is end-of-life...\\n'``. :func:`relay_as_text` replaces that sink, before the
Node process starts, with one that writes such lines as the text they are; importing this module
does it (``longstep_kit.app`` imports it before ``aws_cdk``).
"""

from __future__ import annotations

import base64
import json
import sys
from typing import IO, Any


def _write_text(line: bytes | str) -> None:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def stderr_sink(reader: IO[Any]) -> None:
    """jsii's sink, with non-JSON lines written as text (its JSON console messages as before)."""
    for line in iter(reader.readline, b""):
        if not line:
            break
        try:
            console = json.loads(line)
        except ValueError:
            _write_text(line)
            continue
        if not isinstance(console, dict):
            _write_text(line)
            continue
        if console.get("stderr") is not None:
            sys.stderr.buffer.write(base64.b64decode(console["stderr"]))
            sys.stderr.flush()
        if console.get("stdout") is not None:
            sys.stdout.buffer.write(base64.b64decode(console["stdout"]))
            sys.stdout.flush()


def relay_as_text() -> bool:
    """Install :func:`stderr_sink` as jsii's; call before ``import aws_cdk`` starts the Node process.

    Returns:
        True when jsii's sink is (now) this one; False when jsii has no such sink (another
        jsii release), which is left alone.
    """
    try:
        from jsii._kernel.providers import process
    except ImportError:
        return False
    if not hasattr(process, "stderr_sink"):
        return False
    process.stderr_sink = stderr_sink
    return True


relay_as_text()
