"""An agent that delegates: ``subagents`` names the agents it may hand work to."""

from longstep import Agent, ToolRegistry


def build() -> Agent:
    # The model sees a ``research`` tool (a goal, optional inputs); each call is a child run of
    # the agent registered as ``research`` in cdk.json, and its final answer is the call's result.
    return Agent(
        name="lead",
        system_prompt="Split the investigation into questions and delegate each to research.",
        tools=ToolRegistry(),
        subagents=("research",),
    )
