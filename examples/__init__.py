"""Examples whose code docs/ shows (each block is a verbatim excerpt, checked by tests)."""
