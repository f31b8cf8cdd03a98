"""The Lambda layer holding the ``longstep`` runtime and its dependencies (runtime code only)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_12


class RuntimeLayer(Construct):
    """A layer version built from a prepared directory (see ``longstep_kit.bundling``).

    Args:
        layer_dir: a directory whose ``python/`` folder holds the packages.
    """

    def __init__(self, scope: Construct, cid: str, *, layer_dir: Path) -> None:
        super().__init__(scope, cid)
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(str(layer_dir), exclude=[".complete"]),
            compatible_runtimes=[LAMBDA_RUNTIME],
            compatible_architectures=[lambda_.Architecture.X86_64],
            description="Longstep runtime library",
        )
