"""Reusable constructs: they take typed props and read no context or environment."""
