"""The agent docs/your-agent.md walks through: the invoice agent `longstep init` writes (the same file, checked)."""
