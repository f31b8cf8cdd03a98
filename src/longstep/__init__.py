"""Longstep runtime: durable steps, tools and model providers for long-horizon agents.

This package is shipped as a Lambda layer. It imports nothing from ``infra`` or
``functions``: the doors run one way.
"""

__version__ = "0.1.0"
