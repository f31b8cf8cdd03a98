"""The agent docs/your-agent.md walks through: the invoice agent ``longstep init`` writes.

Its one copy is the project template's ``infra/templates/project/functions/invoice.py`` (what init
copies); this package re-exports it so that this repository can register it beside the sample
(``examples.your_agent:build``): agents are bundled from the project's own packages, and the
template's ``functions`` package shares its name with this repository's entry points' folder.
"""

from longstep_kit.templates.project.functions.invoice import *  # noqa: F403
