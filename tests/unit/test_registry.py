"""The tool registry, Tool specs and argument parsing, and the sample triage tools."""

import pytest
from pydantic import BaseModel, Field

from agents import triage
from longstep.errors import ToolArgumentsError, UnknownToolError
from longstep.tools.registry import Effect, LedgerEntry, ProbeAnswer, Tool, ToolContext, ToolRegistry, tool


class EchoArgs(BaseModel):
    text: str = Field(min_length=1, description="what to echo")
    times: int = Field(default=1, ge=1, le=3)


class Nested(BaseModel):
    key: str


class NestedArgs(BaseModel):
    items: list[Nested]


def echo(args: EchoArgs, ctx: ToolContext):
    """Echo the text.

    Several lines of description.
    """
    return {"echo": args.text * args.times}


def make(name="echo", **kw):
    return Tool(name=name, description="d", args_model=EchoArgs, fn=echo, **kw)


CTX = ToolContext(run_id="r", turn=0, call=0, idempotency_key="r:0:0")


def test_tool_spec_is_a_converse_tool_spec_with_the_pydantic_schema():
    spec = make().tool_spec()
    assert set(spec) == {"toolSpec"}
    inner = spec["toolSpec"]
    assert inner["name"] == "echo"
    assert inner["description"] == "d"
    schema = inner["inputSchema"]["json"]
    assert schema == EchoArgs.model_json_schema()
    assert schema["type"] == "object"
    assert schema["required"] == ["text"]
    assert schema["properties"]["times"]["maximum"] == 3
    assert schema["properties"]["text"]["description"] == "what to echo"


def test_tool_spec_keeps_nested_definitions():
    spec = Tool(name="n", description="d", args_model=NestedArgs, fn=echo).tool_spec()
    schema = spec["toolSpec"]["inputSchema"]["json"]
    assert "Nested" in schema.get("$defs", {})


def test_registry_specs_are_in_name_order():
    reg = ToolRegistry()
    for name in ("zeta", "alpha", "mid"):
        reg.register(make(name))
    assert [s["toolSpec"]["name"] for s in reg.specs()] == ["alpha", "mid", "zeta"]


def test_get_returns_the_registered_tool():
    reg = ToolRegistry()
    item = reg.register(make())
    assert reg.get("echo") is item


def test_get_unknown_raises_listing_available_tools():
    reg = ToolRegistry()
    reg.register(make("beta"))
    reg.register(make("alpha"))
    with pytest.raises(UnknownToolError) as info:
        reg.get("gamma")
    msg = str(info.value)
    assert "gamma" in msg
    assert "alpha" in msg and "beta" in msg
    assert msg.index("alpha") < msg.index("beta")


def test_duplicate_registration_raises_and_keeps_the_first():
    reg = ToolRegistry()
    first = reg.register(make())
    with pytest.raises(ValueError, match="echo"):
        reg.register(make())
    assert reg.get("echo") is first
    assert len(reg.specs()) == 1


def test_parse_args_returns_a_model_instance():
    args = make().parse_args({"text": "hi", "times": 2})
    assert isinstance(args, EchoArgs)
    assert (args.text, args.times) == ("hi", 2)


@pytest.mark.parametrize(
    "raw, field",
    [({}, "text"), ({"text": ""}, "text"), ({"text": "x", "times": 9}, "times"), ({"text": "x", "times": "lots"}, "times")],
)
def test_parse_args_errors_name_the_field(raw, field):
    with pytest.raises(ToolArgumentsError) as info:
        make().parse_args(raw)
    msg = str(info.value)
    assert "echo" in msg
    assert f"{field}:" in msg


def test_parse_args_nested_error_has_dotted_path():
    item = Tool(name="n", description="d", args_model=NestedArgs, fn=echo)
    with pytest.raises(ToolArgumentsError, match=r"items\.1\.key"):
        item.parse_args({"items": [{"key": "a"}, {}]})


@pytest.mark.parametrize("raw", [None, [], "text", 3])
def test_parse_args_rejects_non_objects(raw):
    with pytest.raises(ToolArgumentsError, match="JSON object"):
        make().parse_args(raw)


def test_check_then_act_without_check_raises():
    with pytest.raises(ValueError, match="check"):
        make(effect=Effect.CHECK_THEN_ACT)


def test_check_then_act_with_check_is_accepted():
    item = make(effect=Effect.CHECK_THEN_ACT, check=lambda args, ctx: None)
    assert item.check is not None


@pytest.mark.parametrize("effect", [Effect.READ, Effect.KEYED, Effect.AT_MOST_ONCE])
def test_other_effects_need_no_check(effect):
    assert make(effect=effect).check is None


def test_decorator_registers_with_docstring_and_returns_the_function():
    reg = ToolRegistry()
    returned = tool(reg, effect=Effect.KEYED, requires_approval=True)(echo)
    assert returned is echo
    item = reg.get("echo")
    assert item.args_model is EchoArgs
    assert item.effect is Effect.KEYED
    assert item.requires_approval is True
    assert item.description.startswith("Echo the text.")
    assert "\n    " not in item.description  # cleaned of indentation
    assert item.fn(EchoArgs(text="a", times=2), CTX) == {"echo": "aa"}


def test_decorator_name_override():
    reg = ToolRegistry()
    tool(reg, name="shout")(echo)
    assert [s["toolSpec"]["name"] for s in reg.specs()] == ["shout"]


def test_decorator_without_docstring_uses_function_name():
    reg = ToolRegistry()

    def quiet(args: EchoArgs, ctx: ToolContext):
        return None

    tool(reg)(quiet)
    assert reg.get("quiet").description == "quiet"


def _unannotated(args, ctx):
    return None


def _dict_annotated(args: dict, ctx: ToolContext):
    return None


def _no_params():
    return None


class NotPydantic:
    pass


def _plain_class(args: NotPydantic, ctx: ToolContext):
    return None


@pytest.mark.parametrize("fn", [_unannotated, _dict_annotated, _no_params, _plain_class])
def test_decorator_requires_a_pydantic_annotated_first_param(fn):
    reg = ToolRegistry()
    with pytest.raises(TypeError, match="pydantic"):
        tool(reg)(fn)
    assert reg.tools == {}


def test_decorator_check_then_act_needs_check():
    reg = ToolRegistry()
    with pytest.raises(ValueError):
        tool(reg, effect=Effect.CHECK_THEN_ACT)(echo)
    assert reg.tools == {}


def _probe(args, ctx):
    return ProbeAnswer.not_happened()


def _ledger(run_id):
    return [LedgerEntry(idempotency_key=f"{run_id}:0:0", run_id=run_id)]


def test_decorator_registers_probe_and_ledger():
    reg = ToolRegistry()
    tool(reg, effect=Effect.AT_MOST_ONCE, probe=_probe, ledger=_ledger)(echo)
    assert reg.tools["echo"].probe is _probe and reg.tools["echo"].ledger is _ledger


@pytest.mark.parametrize("effect", [Effect.READ, Effect.KEYED])
def test_a_probe_is_only_for_at_most_once_tools(effect):
    with pytest.raises(ValueError, match=f"tool echo: probe is only for at_most_once tools, not {effect.value}"):
        make(effect=effect, probe=_probe)


def test_a_read_tool_has_no_ledger():
    with pytest.raises(ValueError, match="tool echo: a read tool makes no effects"):
        make(ledger=_ledger)


def test_probe_answers_say_yes_no_or_cannot_tell():
    assert ProbeAnswer.happened_with({"sent": True}) == ProbeAnswer(happened=True, result={"sent": True})
    assert ProbeAnswer.not_happened().happened is False
    assert ProbeAnswer.unknown("down") == ProbeAnswer(happened=None, reason="down")


# -- the sample triage agent --------------------------------------------------------------


def test_triage_tools_and_effects():
    tools = triage.registry.tools
    assert set(tools) == {"search_docs", "read_document", "file_ticket", "update_ticket", "send_email"}
    assert tools["search_docs"].effect is Effect.READ
    assert tools["read_document"].effect is Effect.READ
    assert tools["file_ticket"].effect is Effect.KEYED
    assert tools["update_ticket"].effect is Effect.CHECK_THEN_ACT
    assert tools["update_ticket"].check is triage.update_already_applied
    assert tools["send_email"].effect is Effect.AT_MOST_ONCE
    assert tools["send_email"].probe is triage.email_in_outbox
    assert [n for n, t in tools.items() if t.requires_approval] == ["send_email"]
    # every tool that acts lists its effects in a ledger (the local report counts duplicates from them)
    assert sorted(n for n, t in tools.items() if t.ledger is not None) == ["file_ticket", "send_email", "update_ticket"]


def test_triage_specs_carry_schemas_of_their_arg_models():
    specs = {s["toolSpec"]["name"]: s["toolSpec"] for s in triage.registry.specs()}
    assert specs["search_docs"]["inputSchema"]["json"] == triage.SearchDocsArgs.model_json_schema()
    assert "query" in specs["search_docs"]["inputSchema"]["json"]["required"]
    assert all(spec["description"] for spec in specs.values())


@pytest.mark.parametrize(
    "name, raw, field",
    [
        ("file_ticket", {"title": "t", "priority": "P9"}, "priority"),
        ("update_ticket", {"ticket_id": "TCK-1", "status": "done"}, "status"),
        ("send_email", {"to": "not-an-address", "subject": "s", "body": "b"}, "to"),
        ("search_docs", {"query": "x", "limit": 50}, "limit"),
    ],
)
def test_triage_argument_errors_name_the_field(name, raw, field):
    with pytest.raises(ToolArgumentsError, match=f"{field}:"):
        triage.registry.get(name).parse_args(raw)


def test_ticket_id_is_stable_per_idempotency_key():
    assert triage.ticket_id_for("r:1:0") == triage.ticket_id_for("r:1:0")
    assert triage.ticket_id_for("r:1:0") != triage.ticket_id_for("r:1:1")
    assert triage.ticket_id_for("r:1:0").startswith("TCK-")


def test_build_gives_the_triage_agent():
    agent = triage.build()
    assert agent.name == "triage"
    # the agent has the sample tools plus the built-ins; the module's registry is untouched
    assert set(agent.tools.tools) == set(triage.registry.tools) | {"wait_for", "read_artifact", "remember", "recall"}
    assert "wait_for" not in triage.registry.tools
    assert agent.verifier is triage.verify_summary
    assert agent.system_prompt


def test_a_tool_says_what_a_call_does_and_its_risk_in_the_approvers_words():
    registry = ToolRegistry()
    tool(registry, summary="Echo {text} {times} times", risk="Loud.")(echo)
    declared = registry.get("echo")
    assert declared.summary_of({"text": "hi", "times": 2}) == "Echo hi 2 times" and declared.risk_text() == "Loud."
    assert declared.summary_of({"text": "hi"}) == "Echo hi (not given) times"
    plain = Tool(name="p", description="Echo the text.\nMore.", args_model=EchoArgs, fn=echo, effect=Effect.AT_MOST_ONCE)
    assert plain.summary_of({}) == "Echo the text." and "cannot be taken back" in plain.risk_text()  # no jargon
    with pytest.raises(ValueError, match=r"summary names \{color\}, which is not one of its arguments \(text, times\)"):
        tool(ToolRegistry(), summary="Echo in {color}")(echo)
    with pytest.raises(ValueError, match="must name an argument"):
        tool(ToolRegistry(), summary="Echo {text!r}")(echo)


def test_the_edit_form_follows_the_schema_and_refuses_in_plain_words():
    from typing import Literal

    from pydantic import ValidationError

    from longstep.humans import argument_form as forms

    class Args(BaseModel):
        to: str = Field(pattern=r"^[^@]+@[^@]+$", description="an email address")
        count: int = Field(default=1, ge=1)
        tags: list[int] = []
        mode: Literal["fast", "safe"] = "safe"
        dry: bool = False
        note: str | None = None
        items: list[Nested] = []

    fields = forms.fields_of(Args.model_json_schema())
    assert [(f.name, f.kind) for f in fields] == [
        ("to", "text"), ("count", "integer"), ("tags", "list"), ("mode", "choice"), ("dry", "boolean"), ("note", "text"), ("items", "json"),
    ]  # fmt: skip
    form = {
        "arg.to": "x",
        "arg.count": "0",
        "arg.tags": "1\n2\r\n",
        "arg.mode": "fast",
        "arg.dry": "yes",
        "arg.note": "",
        "arg.items": '[{"key": "k"}]',
    }
    arguments, errors = forms.arguments_from(fields, form)
    assert errors == {} and arguments == {"to": "x", "count": 0, "tags": [1, 2], "mode": "fast", "dry": True, "note": None, "items": [{"key": "k"}]}
    with pytest.raises(ValidationError) as refused:
        Args.model_validate(arguments)
    assert forms.plain_errors(refused.value, fields) == {"to": "is not in the expected form (an email address)", "count": "must be 1 or more"}
    _, errors = forms.arguments_from(fields, {**form, "arg.count": "many", "arg.tags": "1\nthree", "arg.mode": "slow", "arg.items": "{"})
    assert errors == {
        "count": "must be a whole number",
        "tags": "line 2 ('three') must be a whole number",
        "mode": "must be one of: fast, safe",
        "items": "is not valid JSON (Expecting property name enclosed in double quotes, line 1)",
    }


def test_a_tool_that_takes_any_argument_is_worded_and_edited_from_its_call():
    """An MCP tool's arguments are named by its server: the summary is not checked at declaration,
    and the edit form guesses each argument's control from the call's value."""
    from longstep import McpServer, McpTool
    from longstep.humans import argument_form as forms

    server = McpServer(
        "depot", url="https://depot.example/mcp", tools={"ship_order": McpTool(summary="Ship {reservation} to {address}", risk="Final.")}
    )
    shipped = server.register(ToolRegistry()).get("ship_order")
    assert shipped.summary_of({"reservation": "r1"}) == "Ship r1 to (not given)" and shipped.risk_text() == "Final."
    call = {"reservation": "r1", "count": 2, "express": True, "tags": ["a", "b"], "box": {"w": 1}}
    fields = forms.with_undeclared(forms.fields_of(shipped.args_model.model_json_schema()), call)
    assert [(f.name, f.kind) for f in fields] == [
        ("reservation", "text"),
        ("count", "integer"),
        ("express", "boolean"),
        ("tags", "list"),
        ("box", "json"),
    ]
    form = {f"arg.{f.name}": forms.form_value(f, call[f.name]) for f in fields}
    assert forms.arguments_from(fields, form) == (call, {})  # what the form shows reads back as the call
