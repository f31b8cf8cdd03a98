"""An agent whose final answer a verifier checks; a rejected answer is fed back to the model."""

from longstep import Agent, ToolRegistry, Verdict

registry = ToolRegistry()


def verify_summary(answer: str, messages: list[dict]) -> Verdict:
    """Accept only an answer that starts with a summary."""
    if answer.strip().lower().startswith("summary"):
        return Verdict(ok=True)
    return Verdict(ok=False, feedback="finish with a line starting 'Summary:'")


def build() -> Agent:
    return Agent(
        name="triage",
        system_prompt="Triage the backlog, then summarize what you did.",
        tools=registry,
        verifier=verify_summary,
        max_model_corrections=3,  # consecutive model mistakes fed back before the run escalates
        max_verifier_failures=2,  # consecutive rejected answers before the run escalates
    )
