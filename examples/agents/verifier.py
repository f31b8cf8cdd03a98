"""An agent whose final answer a verifier checks; a rejected answer is fed back to the model."""

from longstep import Agent, ToolRegistry, Verdict

registry = ToolRegistry()


RULE = "finish with a line that starts with 'Summary:'"  # the prompt and the feedback say the same


def verify_summary(answer: str, messages: list[dict]) -> Verdict:
    """Accept an answer with a line that starts with ``Summary:`` (text may come before it)."""
    if any(line.strip().lower().startswith("summary:") for line in answer.splitlines()):
        return Verdict(ok=True)
    return Verdict(ok=False, feedback=RULE)


def build() -> Agent:
    return Agent(
        name="triage",
        system_prompt=f"Triage the backlog, then {RULE}.",
        tools=registry,
        verifier=verify_summary,
        max_model_corrections=3,  # consecutive model mistakes fed back before the run escalates
        max_verifier_failures=2,  # consecutive rejected answers before the run escalates
    )
