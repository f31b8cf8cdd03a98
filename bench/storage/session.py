"""A deterministic simulated coding session: the workload every storage system records.

A seeded RNG drives an agent through a synthetic repository of ~70 source files (2-60 KB each,
log-uniform). Each turn the "model" writes some reasoning text and asks for one to three tool
calls: read a file (files are read again after they are edited, and sometimes again unchanged),
grep, edit a file (the edit arrives as ``old_string``/``new_string`` in the model's toolUse and
comes back as a diff), run the tests (pytest-like logs with tracebacks), show the git diff, list
files. The last turn is a final answer without tool calls.

The session is plain data (:class:`Session`): model turns with their tool calls and the exact
output of each call. Each storage system replays it through its own message types; the bytes
differ only in how each system stores them.
"""

from __future__ import annotations

import json
import math
import random
import zlib
from dataclasses import dataclass, field
from typing import Any

DEFAULT_SEED = 20_251_130

SYSTEM_PROMPT = (
    "You are a careful software engineer working in a Python repository. Use the tools to read, "
    "search, edit and test the code. Make small, verified changes and finish with a summary."
)

GOAL = (
    "The retry logic in the checkpoint client drops the last write when a throttled request is "
    "retried after the session cursor moved. Find the cause, fix it without changing the public "
    "API, add a regression test, and make the whole test suite pass."
)

_NOUNS = (
    "config client request response session cache record handler parser token buffer payload "
    "result status index offset limit retry timeout schema table bucket event context state cursor "
    "checkpoint snapshot delta message turn step tool artifact budget summary report queue worker "
    "lease lock item batch page region account policy metric span trace window"
).split()
_VERBS = (
    "get load save parse build apply check render merge split resolve validate encode decode fetch "
    "store read write flush compute retry schedule release acquire publish collect"
).split()
_TYPES = ("str", "int", "bool", "bytes", "float", "dict[str, Any]", "list[str]", "Optional[int]")
_ERRORS = ("ValueError", "KeyError", "RuntimeError", "TimeoutError", "ConflictError", "ThrottledError")
_WORDS = (
    "the a this that when then if so we it should must cannot is are was first last next each every "
    "retry write read cursor session value record request test failure error check case path flow "
    "state because before after while still again only also here there loop call result"
).split()
_PACKAGES = ("core", "store", "client", "retry", "events", "api", "util")

TOOL_WEIGHTS = {"read_file": 32, "grep": 16, "edit_file": 20, "run_tests": 12, "git_diff": 5, "list_files": 5}


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes and the exact text the tool returns."""

    id: str
    name: str
    input: dict[str, Any]
    output: str


@dataclass(frozen=True)
class Turn:
    """One model turn: reasoning text and the tool calls (none on the final turn)."""

    index: int
    text: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Session:
    """The whole simulated session."""

    seed: int
    goal: str
    system_prompt: str
    turns: tuple[Turn, ...]
    stats: dict[str, Any] = field(default_factory=dict)

    def call(self, turn: int, index: int) -> ToolCall:
        """The ``index``-th tool call of ``turn``."""
        return self.turns[turn].calls[index]


# -- text generation --------------------------------------------------------------------------


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _sentence(rng: random.Random, lo: int = 6, hi: int = 16) -> str:
    words = [rng.choice(_WORDS + _NOUNS) for _ in range(rng.randint(lo, hi))]
    return " ".join(words).capitalize() + "."


def _code_line(rng: random.Random, indent: int) -> str:
    pad = "    " * indent
    n1, n2, fn = rng.choice(_NOUNS), rng.choice(_NOUNS), _ident(rng)
    kind = rng.randrange(10)
    if kind == 0:
        return f"{pad}{n1} = self.{fn}({n2}, timeout={rng.randint(1, 90)})"
    if kind == 1:
        return f"{pad}if {n1} is None or {n1}.{n2} > {rng.randint(0, 512)}:"
    if kind == 2:
        return f'{pad}raise {rng.choice(_ERRORS)}(f"{n1} {rng.choice(_WORDS)} {{{n2}!r}}")'
    if kind == 3:
        return f"{pad}for {n1} in self.{n2}s:"
    if kind == 4:
        return f"{pad}# {_sentence(rng, 4, 12)}"
    if kind == 5:
        return f"{pad}return {fn}({n1}, {n2}=self.{n2})"
    if kind == 6:
        return f'{pad}logger.debug("{n1} %s {rng.choice(_WORDS)} %d", {n2}, len(self.{n1}s))'
    if kind == 7:
        return f"{pad}self.{n1}[{n2}.key] = {n2}"
    if kind == 8:
        return f"{pad}{n1}_{n2} = {{k: v for k, v in {n2}.items() if v is not None}}"
    return f"{pad}await self.{fn}({n1})" if rng.random() < 0.2 else f"{pad}{n1}.{fn}()"


def _function(rng: random.Random, method: bool) -> list[str]:
    base = 1 if method else 0
    pad = "    " * base
    args = ", ".join(f"{rng.choice(_NOUNS)}: {rng.choice(_TYPES)}" for _ in range(rng.randint(0, 3)))
    self_arg = "self, " if method else ""
    lines = [f"{pad}def {_ident(rng)}({self_arg}{args}) -> {rng.choice(_TYPES)}:", f'{pad}    """{_sentence(rng)}"""']
    depth = 1
    for _ in range(rng.randint(4, 22)):
        line = _code_line(rng, base + depth)
        lines.append(line)
        if line.endswith(":"):
            depth = min(depth + 1, 3)
        elif depth > 1 and rng.random() < 0.35:
            depth -= 1
    lines.append("")
    return lines


def _source_file(rng: random.Random, target_bytes: int) -> list[str]:
    lines = ['"""' + _sentence(rng, 8, 20) + '"""', "", "from __future__ import annotations", ""]
    for _ in range(rng.randint(3, 8)):
        lines.append(f"from {rng.choice(_PACKAGES)}.{rng.choice(_NOUNS)} import {rng.choice(_NOUNS).capitalize()}")
    lines += ["", "logger = logging.getLogger(__name__)", ""]
    size = sum(len(line) + 1 for line in lines)
    while size < target_bytes:
        if rng.random() < 0.3:
            block = [f"class {rng.choice(_NOUNS).capitalize()}{rng.choice(_NOUNS).capitalize()}:", f'    """{_sentence(rng)}"""', ""]
            for _ in range(rng.randint(1, 4)):
                block += _function(rng, method=True)
        else:
            block = _function(rng, method=False)
        lines += block
        size += sum(len(line) + 1 for line in block)
    return lines


def _text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


# -- the simulated repository and agent -------------------------------------------------------


class _World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.files: dict[str, list[str]] = {}
        for i in range(70):
            pkg = _PACKAGES[i % len(_PACKAGES)]
            path = f"tests/test_{rng.choice(_NOUNS)}_{i}.py" if i % 5 == 4 else f"src/{pkg}/{rng.choice(_NOUNS)}_{i}.py"
            target = int(math.exp(rng.uniform(math.log(2 * 1024), math.log(60 * 1024))))
            self.files[path] = _source_file(rng, target)
        self.paths = sorted(self.files)
        self.read_versions: dict[str, int] = {}  # path -> version last read
        self.version: dict[str, int] = {p: 0 for p in self.paths}
        self.reread_due: list[tuple[int, str]] = []
        self.hunks: list[str] = []
        self.failures = 6
        self.counts = {"reads": 0, "rereads_after_edit": 0, "rereads_unchanged": 0}

    # tools -----------------------------------------------------------------------------------

    def read_file(self, turn: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        due = [p for t, p in self.reread_due if t <= turn]
        if due:
            path = due[0]
            self.reread_due = [(t, p) for t, p in self.reread_due if p != path]
        elif self.read_versions and rng.random() < 0.25:
            path = rng.choice(sorted(self.read_versions))
        else:
            path = rng.choice(self.paths)
        if path in self.read_versions:
            key = "rereads_unchanged" if self.read_versions[path] == self.version[path] else "rereads_after_edit"
            self.counts[key] += 1
        self.counts["reads"] += 1
        self.read_versions[path] = self.version[path]
        return {"path": path}, _text(self.files[path])

    def grep(self, turn: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        pattern = rng.choice(_NOUNS) if rng.random() < 0.4 else f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"
        scope = rng.choice(["src/", "tests/", ""])
        out: list[str] = []
        for path in self.paths:
            if not path.startswith(scope):
                continue
            for number, line in enumerate(self.files[path], 1):
                if pattern in line:
                    out.append(f"{path}:{number}:{line.strip()}")
                    if len(out) >= 150:
                        break
            if len(out) >= 150:
                out.append("... (results truncated at 150 matches)")
                break
        return {"pattern": pattern, "path": scope or "."}, _text(out or ["(no matches)"])

    def edit_file(self, turn: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        candidates = sorted(self.read_versions) or self.paths
        path = rng.choice(candidates)
        lines = self.files[path]
        start = rng.randrange(max(1, len(lines) - 12))
        count = rng.randint(2, 12)
        old = lines[start : start + count]
        new = [_code_line(rng, rng.randint(1, 3)) for _ in range(rng.randint(2, 15))]
        self.files[path] = lines[:start] + new + lines[start + count :]
        self.version[path] += 1
        if rng.random() < 0.6:
            self.reread_due.append((turn + rng.randint(1, 4), path))
        before = lines[max(0, start - 3) : start]
        after = lines[start + count : start + count + 3]
        hunk = [
            f"--- a/{path}",
            f"+++ b/{path}",
            f"@@ -{start - len(before) + 1},{len(before) + count + len(after)} +{start - len(before) + 1},{len(before) + len(new) + len(after)} @@",
        ]
        hunk += [f" {line}" for line in before] + [f"-{line}" for line in old] + [f"+{line}" for line in new] + [f" {line}" for line in after]
        diff = _text(hunk)
        self.hunks.append(diff)
        if rng.random() < 0.5 and self.failures > 0:
            self.failures -= 1
        elif self.failures == 0 and rng.random() < 0.3:
            self.failures = rng.randint(1, 4)  # the edit broke something else
        args = {"path": path, "old_string": _text(old), "new_string": _text(new)}
        return args, f"The file {path} has been updated.\n{diff}"

    def run_tests(self, turn: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        tests = [p for p in self.paths if p.startswith("tests/")]
        target = rng.choice(tests + ["tests/"] * 3)
        selected = tests if target == "tests/" else [target]
        out = [
            "============================= test session starts ==============================",
            "platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0",
            f"rootdir: /workspace/repo\ncollected {sum(12 + len(self.files[t]) // 40 for t in selected)} items",
            "",
        ]
        failing = min(self.failures + rng.randint(-1, 2), len(selected) * 3) if self.failures else 0
        failing = max(0, failing)
        for t in selected:
            n = 12 + len(self.files[t]) // 40
            marks = "".join("F" if failing and rng.random() < 0.05 else "." for _ in range(n))
            out.append(f"{t} {marks}{' ' * max(1, 60 - len(marks) % 60)}[{rng.randint(1, 100):3d}%]")
        if failing:
            out += ["", "=================================== FAILURES ==================================="]
            for _ in range(failing):
                src = rng.choice(self.paths)
                body = self.files[src]
                at = rng.randrange(max(1, len(body) - 25))
                out.append(f"___________________ test_{_ident(rng)}[{rng.choice(_NOUNS)}] ___________________")
                out += [f"    {line}" for line in body[at : at + rng.randint(8, 25)]]
                out.append(f">       assert {rng.choice(_NOUNS)}.{rng.choice(_NOUNS)} == {rng.randint(0, 9)}")
                out.append(f"E       AssertionError: assert {rng.randint(10, 99)} == {rng.randint(0, 9)}")
                out.append(f"{src}:{at + 12}: AssertionError")
                out += ["----------------------------- Captured log call ------------------------------"]
                out += [
                    f"DEBUG    {rng.choice(_PACKAGES)}.{rng.choice(_NOUNS)}:{_ident(rng)}.py:{rng.randint(10, 900)} {_sentence(rng)}"
                    for _ in range(rng.randint(2, 14))
                ]
            out.append("=========================== short test summary info ============================")
            out += [f"FAILED {rng.choice(tests)}::test_{_ident(rng)} - AssertionError" for _ in range(failing)]
        passed = sum(12 + len(self.files[t]) // 40 for t in selected) - failing
        summary = f"{failing} failed, {passed} passed" if failing else f"{passed} passed"
        out.append(f"======================== {summary} in {rng.uniform(0.5, 40):.2f}s ========================")
        return {"path": target, "args": "-q -x" if rng.random() < 0.3 else "-q"}, _text(out)

    def git_diff(self, turn: int) -> tuple[dict[str, Any], str]:
        if not self.hunks:
            return {}, "(no changes)\n"
        recent = self.hunks[-8:]
        head = f"diff --git ({len(self.hunks)} hunks in {sum(1 for v in self.version.values() if v)} files; last {len(recent)} shown)\n"
        return {}, head + "".join(recent)

    def list_files(self, turn: int) -> tuple[dict[str, Any], str]:
        rng = self.rng
        prefix = rng.choice(["src/", "tests/", "src/" + rng.choice(_PACKAGES) + "/"])
        out = [f"{len(_text(self.files[p])):>8}  {p}" for p in self.paths if p.startswith(prefix)]
        return {"path": prefix}, _text(out or ["(empty)"])


def _reasoning(rng: random.Random, world: _World) -> str:
    if rng.random() < 0.1:
        steps = [f"{i}. {_sentence(rng, 10, 30)}" for i in range(1, rng.randint(4, 12))]
        return "Plan:\n" + "\n".join(steps)
    return " ".join(_sentence(rng) for _ in range(rng.randint(1, 5)))


def _final_answer(rng: random.Random, world: _World) -> str:
    edited = sorted(p for p, v in world.version.items() if v)
    lines = ["Summary of the changes:"] + [f"- {p}: {_sentence(rng, 6, 14)}" for p in edited[:25]]
    lines += ["", "All tests pass. " + " ".join(_sentence(rng) for _ in range(4))]
    return "\n".join(lines)


def _packed(data: bytes) -> int:
    return min(len(data), len(zlib.compress(data, 6)))


def floor_bytes(turns: list[Turn] | tuple[Turn, ...]) -> int:
    """The storage floor of a session (issue 28): its distinct content, each item compressed on its
    own (zlib level 6, when that makes it smaller): every distinct tool output once, and every
    model message (its text, and its tool calls' names, ids and inputs as JSON). No keys, no
    metadata, no index: what any system must keep to resume the session, in the fewest bytes an
    item-by-item store holds it in."""
    outputs = {c.output for t in turns for c in t.calls}
    messages = [
        json.dumps({"text": t.text, "calls": [{"name": c.name, "id": c.id, "input": c.input} for c in t.calls]}, separators=(",", ":")) for t in turns
    ]
    return sum(_packed(o.encode()) for o in outputs) + sum(_packed(m.encode()) for m in messages)


def simulate(turns: int, seed: int = DEFAULT_SEED) -> Session:
    """The session of ``turns`` model turns (the last one answers without tools)."""
    if turns < 2:
        raise ValueError("a session needs at least 2 turns")
    rng = random.Random(seed)
    world = _World(rng)
    names = list(TOOL_WEIGHTS)
    weights = list(TOOL_WEIGHTS.values())
    out: list[Turn] = []
    for index in range(turns - 1):
        text = _reasoning(rng, world)
        n_calls = rng.choices((1, 2, 3), weights=(65, 25, 10))[0]
        calls = []
        for c in range(n_calls):
            due = any(t <= index for t, _ in world.reread_due)
            name = "read_file" if due else rng.choices(names, weights=weights)[0]
            args, output = getattr(world, name)(index)
            calls.append(ToolCall(id=f"tooluse_{index:05d}_{c}", name=name, input=args, output=output))
        out.append(Turn(index=index, text=text, calls=tuple(calls)))
    out.append(Turn(index=turns - 1, text=_final_answer(rng, world), calls=()))
    outputs = [c.output for t in out for c in t.calls]
    by_tool: dict[str, int] = {}
    for t in out:
        for c in t.calls:
            by_tool[c.name] = by_tool.get(c.name, 0) + 1
    stats = {
        "turns": turns,
        "tool_calls": len(outputs),
        "tool_calls_by_name": dict(sorted(by_tool.items())),
        "tool_output_bytes": sum(len(o.encode()) for o in outputs),
        "distinct_tool_output_bytes": sum(len(o.encode()) for o in set(outputs)),
        "floor_bytes": floor_bytes(out),
        "model_text_bytes": sum(len(t.text.encode()) for t in out),
        "largest_tool_output_bytes": max(len(o.encode()) for o in outputs),
        **world.counts,
    }
    return Session(seed=seed, goal=GOAL, system_prompt=SYSTEM_PROMPT, turns=tuple(out), stats=stats)
