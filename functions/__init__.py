"""Generic Lambda handlers: one module per task; each loads the configured agents (longstep.agents)."""
