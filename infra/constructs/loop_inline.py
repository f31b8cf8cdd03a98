"""An agent's own ModelTurn function, for an agent that runs read tools inline (``Agent.inline_read_tools``).

The shared ModelTurn serves every agent, so it holds no agent's grants. An agent that runs its
read tools inside ModelTurn's invocation (``longstep.tasks.inline_tools``) gets a ModelTurn of its
own: ModelTurn's access (``loop_access``), the models, and the read part of the agent's declared
resources (``AgentResources.bind_reads``); never a write of the agent's, which stay with its
CallTool. Its environment names the tools it may inline, and how much of its timeout an inline
call needs left (CallTool's timeout: an inline call gets at least what CallTool would give it).
"""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from longstep import settings as env
from longstep.memory import RECALL
from longstep.resources import ENV_AGENT
from longstep.settings import ENV_INLINE_RESERVE_SECONDS, ENV_INLINE_TOOLS
from longstep.tasks.inline_tools import inline_tools_variable
from longstep_kit.constructs.durable_agent_props import DurableAgentProps
from longstep_kit.constructs.loop_grants import configure_providers, grant_memory, grant_models


def own_model_turn(scope: Construct, fn: lambda_.Function, agent: str, tools: tuple[str, ...], props: DurableAgentProps) -> lambda_.Function:
    """``fn`` (``ModelTurn-<agent>``, granted ModelTurn's access) made the agent's own ModelTurn.

    Raises:
        ValueError: ModelTurn's timeout leaves no time for an inline call (it must exceed CallTool's).
    """
    reserve = int(props.tool_timeout.to_seconds())
    if props.model_timeout.to_seconds() <= reserve:
        raise ValueError(
            f"agents.{agent}: inline_read_tools needs model_timeout_seconds ({int(props.model_timeout.to_seconds())}) above "
            f"tool_timeout_seconds ({reserve}): an inline call starts only with CallTool's timeout left in ModelTurn's"
        )
    fn.add_environment(ENV_INLINE_TOOLS, inline_tools_variable(tools))
    fn.add_environment(ENV_INLINE_RESERVE_SECONDS, str(reserve))
    grant_models(scope, fn, props)
    configure_providers(fn, props.model_providers)
    resources = props.agent_resources.get(agent)
    if resources is not None:
        resources.bind_reads(fn)
    else:
        fn.add_environment(ENV_AGENT, agent)
    if RECALL in tools and props.memory is not None:  # recall reads the agent's namespaces only
        grant_memory(fn, ("dynamodb:Query",), props.memory.table_arn, agent)
        fn.add_environment(env.ENV_MEMORY_TABLE, props.memory.table_name)
    return fn
