"""Waiting benchmark (issue 4): what a 3-day wait costs, and how fast a run reacts when it ends."""
