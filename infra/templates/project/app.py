#!/usr/bin/env python3
"""The CDK app of this project: cdk.json's ``longstep`` context names the agents and the settings."""

import sys
from pathlib import Path

import longstep_kit.app

PROJECT_DIR = Path(__file__).resolve().parent


def build_app(context=None, outdir=None):
    """This project's app (``longstep local`` and the tests pass ``context`` and ``outdir``)."""
    return longstep_kit.app.build_app(PROJECT_DIR, context=context, outdir=outdir)


if __name__ == "__main__":
    sys.exit(longstep_kit.app.main(PROJECT_DIR))
