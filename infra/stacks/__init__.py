"""Stacks: they deploy constructs, wiring configuration into typed props."""
