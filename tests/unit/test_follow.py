"""``longstep show --follow``: each recorded step printed once, in order, until the run stops."""

from __future__ import annotations

from types import SimpleNamespace

from longstep_kit.cli.views_cmds import follow


def _entry(turn: int, kind: str, name: str, at: float) -> SimpleNamespace:
    return SimpleNamespace(turn=turn, call=None if kind == "model" else 0, kind=kind, name=name, at=at, effect=None, result="ok")


class _Growing:
    """A run that records one more step per look and stops after three."""

    def __init__(self) -> None:
        self.looks = 0
        self.steps = [_entry(0, "model", "model", 1.0), _entry(0, "tool", "search_docs", 2.0), _entry(1, "model", "model", 3.0)]

    def view(self, run_id, effects, memory, now):
        self.looks += 1
        shown = self.steps[: self.looks]
        status = "RUNNING" if self.looks < len(self.steps) else "SUCCEEDED"
        return SimpleNamespace(
            timeline=shown,
            executions=[SimpleNamespace(status=status)],
            state=SimpleNamespace(status=status, detail=""),
        )


def test_each_step_is_printed_once_until_the_run_stops():
    lines: list[str] = []
    sleeps: list[float] = []
    inspector = _Growing()
    status = follow(inspector, "r1", None, interval=2.0, sleep=sleeps.append, emit=lines.append)
    assert status == "SUCCEEDED"
    assert [line.split()[-2] for line in lines[:-1]] == ["model", "search_docs", "model"]
    assert lines[-1] == "run r1: SUCCEEDED"
    assert sleeps == [2.0, 2.0]  # it looked three times, waiting between looks only
