"""Live runs' benchmark: what the event stream costs per 1,000 turns, and a 3-day pause."""
