#!/usr/bin/env python3
"""The CDK app: reads the ``longstep`` context once, validates it, builds the stack."""

from __future__ import annotations

import sys

import aws_cdk as cdk

from infra.bundling import build_layer
from infra.config import CONTEXT_KEY, ConfigError, load_config
from infra.stacks.longstep_stack import LongstepStack


def build_app(context: dict | None = None, outdir: str | None = None) -> cdk.App:
    """Build the app (tests pass ``context`` and ``outdir``; ``cdk`` passes them through the CLI)."""
    app = cdk.App(context=context or {}, outdir=outdir) if (context or outdir) else cdk.App()
    config = load_config(app.node.try_get_context(CONTEXT_KEY))
    LongstepStack(app, config.stack_name, config=config, layer_dir=build_layer())
    return app


def main() -> int:
    try:
        app = build_app()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
