"""Longstep runtime: durable steps, tools and model providers for long-horizon agents.

This package is shipped as the Lambda layer. It imports nothing from ``longstep_kit`` or the
project's ``agents``: the doors run one way.
"""

__version__ = "0.1.0"
