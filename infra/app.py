"""Building a project's CDK app: the ``app.py`` of a Longstep project calls :func:`main`.

A project is a directory holding ``cdk.json`` (the ``longstep`` context: the deployment config
and the agents), ``app.py`` and the packages its agents live in.
"""

from __future__ import annotations

import sys
from pathlib import Path

import longstep_kit.jsii_relay  # noqa: F401  (first: jsii's Node.js warnings as text, not b'...')
import aws_cdk as cdk

from longstep_kit.bedrock_access import BedrockAccessError
from longstep_kit.bundling import BundlingError, build_function_code, build_layer, default_cache
from longstep_kit.config import CONTEXT_KEY, ConfigError, load_config
from longstep_kit.declarations import code_references, read_declarations
from longstep_kit.stacks.longstep_stack import LongstepStack


def build_app(project_dir: Path, context: dict | None = None, outdir: str | None = None, env: cdk.Environment | None = None) -> cdk.App:
    """The project's app with its stack (tests pass ``context`` and ``outdir``; ``cdk`` passes them itself).

    ``env`` pins the stack to an account and Region (the model is then chosen at synth); without
    it the stack is environment-agnostic and the model's profile is chosen at deploy time
    (``longstep_kit.constructs.model_profile``).

    Raises:
        ConfigError: the ``longstep`` context is invalid (the message names each bad key).
        BedrockAccessError: a configured model cannot be called from the stack's Region (one line).
        BundlingError: an asset could not be built.
    """
    app = cdk.App(context=context or {}, outdir=outdir) if (context or outdir) else cdk.App()
    config = load_config(app.node.try_get_context(CONTEXT_KEY))
    if not config.agents:
        raise ConfigError(f'{CONTEXT_KEY}.agents: name at least one agent, e.g. {{"triage": "agents.triage:build"}}')
    declared = read_declarations(project_dir, config)
    cache = default_cache(project_dir)
    LongstepStack(
        app,
        config.stack_name,
        config=config,
        layer_dir=build_layer(cache),
        function_code_dir=build_function_code(project_dir, code_references(config), cache),
        **vars(declared),
        **({"env": env} if env is not None else {}),
    )
    return app


def main(project_dir: Path) -> int:
    """Synthesize the project's app; a configuration or bundling error is one line and exit code 2."""
    import time

    began = time.perf_counter()
    # On stderr, which the CDK CLI shows: a synth is silent for half a minute otherwise.
    print("longstep: building the app's stack (agents, functions, the state machine)...", file=sys.stderr, flush=True)
    try:
        app = build_app(project_dir)
    except (ConfigError, BundlingError, BedrockAccessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"longstep: built in {time.perf_counter() - began:.1f} s; synthesizing the template...", file=sys.stderr, flush=True)
    app.synth()
    print(f"longstep: synthesized in {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    return 0
