"""LangGraph on Longstep: the checkpointer conformance suite run against LongstepSaver."""
