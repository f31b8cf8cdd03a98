"""Issue 35's figures, printed and held: the data that crosses the steps is typed, and each step
has one name.

- String-key reads of the run record outside the storage codec (``run["agent"]``,
  ``run.get(STOP)`` on a variable holding the run record): the runtime reads attributes of
  ``longstep.contract.run.RunRecord`` instead. Before issue 35: 91 in the runtime and the kit (the
  CLI and the run UI, 15 more, read the plain record through ``RunRecord``'s ``Mapping`` view and
  are another change's: printed, not held).
- Reads through the call item's dicts (``item.decision.get(...)``, ``check = item.check or {}``
  then ``check["..."]``): the sub-records of ``longstep.contract.call.CallItem`` are typed. Before:
  36.
- Steps with one name across state, construct, handler file and task module.

Run with ``-s`` to see the figures: ``pytest -s tests/unit/test_contract_figures.py``.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNTIME = REPO / "layers" / "runtime"
# The storage codec: where the stored item is decoded (the contract) and read and written (the stores).
CODEC = ("layers/runtime/contract/", "layers/runtime/store.py", "layers/runtime/inmemory.py", "layers/runtime/codec.py")
# Another change's (run-status reporting): they read the plain record through ``RunRecord``'s Mapping view.
ELSEWHERE = ("infra/cli/", "infra/ui/")
SCANNED = ("layers/runtime", "functions", "infra")
# Their ``run`` is a row of the runs index (``sk = index``), not the run record.
INDEX_ROWS = ("infra/ops/fleet_query.py", "infra/ops/fleet_where.py")

# A variable holding the run record: these parameter names (or one typed ``RunRecord``), or
# what ``_is_run_record`` recognizes.
RUN_NAMES = {"run", "run_record"}
# The call item's answers (``CallItem``'s sub-records).
CALL_ANSWERS = {"decision", "resolution", "signal", "check", "child"}

MAX_RUN_RECORD_READS = 9
MAX_MODULE_LINES = 400


def _files(roots: tuple[str, ...]) -> list[Path]:
    return sorted(path for root in roots for path in (REPO / root).rglob("*.py") if "/templates/" not in path.as_posix())


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _reads_of(names: set[str], node: ast.AST) -> list[ast.AST]:
    """Subscripts and ``.get``/``.pop`` calls on a variable of ``names`` under ``node``."""
    found = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load) and isinstance(sub.value, ast.Name) and sub.value.id in names:
            if not (isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, int)):
                found.append(sub)
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("get", "pop")
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id in names
        ):
            found.append(sub)
    return found


def _functions(tree: ast.AST) -> list[ast.AST]:
    return [tree, *(node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))]


def _is_run_record(value: ast.AST) -> bool:
    """Whether ``value`` is the run record itself: ``load_run(...)``, ``RunRecord.of(...)``, a
    store's ``get(run_id, keys.RUN_RECORD)`` (or ``records[keys.RUN_RECORD]``), maybe ``or {}``."""
    if isinstance(value, ast.BoolOp):
        return _is_run_record(value.values[0])
    if isinstance(value, ast.IfExp):
        return _is_run_record(value.body) or _is_run_record(value.orelse)
    if isinstance(value, ast.Subscript):
        return ast.unparse(value.slice).endswith("RUN_RECORD")
    if isinstance(value, ast.Call):
        name = ast.unparse(value.func)
        if name.endswith(("load_run", "load_run_and_call", "RunRecord.of", "RunRecord.from_dict", "RunRecord")):
            return True
        return any(ast.unparse(arg).endswith("RUN_RECORD") for arg in value.args) or any(_is_run_record(arg) for arg in value.args)
    return False


def _assigned_from(function: ast.AST) -> set[str]:
    """Names ``function`` binds to the run record (the first of a tuple: ``run, use = load_run_and_call(...)``)."""
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and _is_run_record(node.value):
            for target in node.targets:
                first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                if isinstance(first, ast.Name):
                    names.add(first.id)
    return names


def run_record_reads(roots: tuple[str, ...] = SCANNED) -> dict[str, int]:
    """String-key reads of the run record, by file (the storage codec left out)."""
    out: dict[str, int] = {}
    for path in _files(roots):
        relative = _relative(path)
        if relative.startswith(CODEC) or relative in INDEX_ROWS:
            continue
        tree = ast.parse(path.read_text())
        count = 0
        for function in _functions(tree):
            params = set()
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in function.args.args + function.args.kwonlyargs:
                    if arg.arg in RUN_NAMES or (arg.annotation is not None and "RunRecord" in ast.unparse(arg.annotation)):
                        params.add(arg.arg)
            names = params | _assigned_from(function)
            body = function.body if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            # Each function counts its own statements; the module counts its top level only.
            nodes = body if body else [n for n in getattr(function, "body", []) if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
            count += sum(len(_reads_of(names, node)) for node in nodes)
        if count:
            out[relative] = count
    return out


def call_answer_reads(roots: tuple[str, ...] = SCANNED) -> dict[str, int]:
    """Reads through the call item's answers as dicts (``x.check.get(...)``, ``check = x.check or {}; check[...]``)."""
    out: dict[str, int] = {}
    for path in _files(roots):
        tree = ast.parse(path.read_text())
        count = 0
        for node in ast.walk(tree):
            # item.check["..."], item.check.get(...)
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr in CALL_ANSWERS:
                count += 1
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr in CALL_ANSWERS
            ):
                count += 1
        for function in _functions(tree):
            # decision = item.decision or {} ... decision.get(...)
            names = set()
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and not isinstance(node.value, ast.Call):
                    if any(isinstance(sub, ast.Attribute) and sub.attr in CALL_ANSWERS for sub in ast.walk(node.value)):
                        names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            if names and isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                count += sum(len(_reads_of(names, node)) for node in function.body)
        if count:
            out[_relative(path)] = count
    return out


@dataclass(frozen=True)
class Step:
    """A step of the agent loop (or the workflow function) and its names."""

    construct: str  # the function's construct id
    handler: str  # functions/<handler>.py
    task: str  # the runtime module its handler calls
    states: tuple[str, ...]  # the states invoking it
    why_not: str = ""  # why its names differ, when they do


STEPS = (
    Step(
        "InitRun",
        "init_run",
        "tasks/init_run",
        ("Init",),
        "the state is Init: renaming it changes the golden definition and the escalation records' step name (Init)",
    ),
    Step("ModelTurn", "model_turn", "tasks/model_turn", ("ModelTurn",)),
    Step("CallTool", "call_tool", "tasks/call_tool", ("CallTool", "CallOneTool")),
    Step("CheckCondition", "check_condition", "tasks/check_condition", ("CheckCondition",)),
    Step("RequestApproval", "request_approval", "tasks/request_approval", ("RequestApproval",)),
    Step("Escalate", "escalate", "tasks/escalate", ("EscalateInit", "EscalateModelTurn", "EscalateCallTool", "EscalateFinish")),
    Step("WaitForEvent", "wait_for_event", "tasks/wait_for_event", ("WaitForEvent",)),
    Step("DelegateToSubagent", "delegate_to_subagent", "tasks/delegate_to_subagent", ("DelegateToSubagent",)),
    Step(
        "ChildFailed",
        "child_failed",
        "tasks/child_failed",
        ("ModelTurnTellParent", "CallToolTellParent"),
        "one function behind a TellParent state per escalating step (<Step>TellParent, <Step>TellParentUnanswered)",
    ),
    Step("ContinueAsNew", "continue_as_new", "tasks/continue_as_new", ("ContinueAsNew",)),
    Step("Finish", "finish", "tasks/finish", ("Finish",)),
    Step("Pause", "pause", "tasks/pause", ("Pause",)),
    Step(
        "FleetGate",
        "fleet_gate",
        "tasks/fleet_gate",
        ("AcquireSlot", "ReleaseSlot", "DrawRate"),
        "one function behind three fleet states (AcquireSlot, ReleaseSlot, DrawRate)",
    ),
    Step(
        "Function",
        "workflow",
        "workflows/tasks",
        ("Run",),
        "the workflow's function: its construct is DurableWorkflow's Function, its states the workflow's passes",
    ),
)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def one_name(step: Step) -> bool:
    """The construct, the handler file and the task module share a name, and every state behind
    it is that name (or ``Escalate<Step>``: a state per escalated step, named for both)."""
    stem = step.task.rsplit("/", 1)[-1]
    if not (_snake(step.construct) == step.handler == stem):
        return False
    return all(
        state == step.construct
        or state in (step.construct + other for other in ("Init", "ModelTurn", "CallTool", "Finish"))
        or (step.construct == "CallTool" and state == "CallOneTool")
        for state in step.states
    )


def _golden_states() -> set[str]:
    def walk(states: dict) -> set[str]:
        names = set(states)
        for state in states.values():
            for inner in [state.get("ItemProcessor") or state.get("Iterator"), *state.get("Branches", [])]:
                if inner:
                    names |= walk(inner["States"])
        return names

    return walk(json.loads((REPO / "tests/infra/golden/state_machine.asl.json").read_text())["States"])


def test_the_run_record_is_read_through_its_attributes():
    reads = run_record_reads()
    elsewhere = run_record_reads(ELSEWHERE)
    kept = {path: n for path, n in reads.items() if not path.startswith(ELSEWHERE)}
    print(f"\nrun record: {sum(kept.values())} string-key reads outside the storage codec (target < 10; 91 before)")
    for path, n in sorted(kept.items()):
        print(f"  {n:3d}  {path}")
    print(f"  (the CLI and the run UI, another change's: {sum(elsewhere.values())})")
    assert sum(kept.values()) <= MAX_RUN_RECORD_READS, kept


def test_the_call_item_is_read_through_its_typed_answers():
    reads = call_answer_reads()
    print(f"\ncall item: {sum(reads.values())} reads through its answers' dicts (target 0; 36 before)")
    assert reads == {}


def test_each_step_has_one_name_or_says_why_not():
    durable_agent = (REPO / "infra/constructs/durable_agent.py").read_text()
    states = _golden_states() | set(re.findall(r'"([A-Z][A-Za-z]+)"', (REPO / "infra/constructs/loop_fleet.py").read_text()))
    workflow_states = (REPO / "infra/constructs/durable_workflow.py").read_text()
    for step in STEPS:
        handler = (REPO / "functions" / f"{step.handler}.py").read_text()
        assert f"longstep.{step.task.replace('/', '.')}" in handler, f"functions/{step.handler}.py does not call {step.task}"
        assert (RUNTIME / f"{step.task}.py").is_file()
        if step.handler != "workflow":
            assert f'"{step.construct}", "longstep_functions.{step.handler}.lambda_handler"' in durable_agent or step.construct == "ModelTurn"
            assert set(step.states) <= states, set(step.states) - states
        else:
            assert f'"{step.construct}",' in workflow_states
    named = [step for step in STEPS if one_name(step)]
    print(f"\nsteps with one name: {len(named)} of {len(STEPS)}")
    for step in STEPS:
        print(f"  {'=' if one_name(step) else '~'} {step.construct:20s} functions/{step.handler}.py  {step.task}.py  {', '.join(step.states)}")
        if not one_name(step):
            print(f"      {step.why_not}")
    assert all(one_name(step) or step.why_not for step in STEPS)
    assert len(named) >= 10


def test_no_module_is_longer_than_the_limit():
    long = {_relative(p): n for p in _files(SCANNED) if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_the_tasks_docstring_lists_every_task_module():
    import longstep.tasks

    modules = {p.stem for p in (RUNTIME / "tasks").glob("*.py") if p.stem != "__init__"}
    listed = set(re.findall(r"^- ``([a-z_]+)``", longstep.tasks.__doc__ or "", flags=re.MULTILINE))
    assert listed == modules
