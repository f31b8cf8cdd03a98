"""Longstep's deploy side: configuration, CDK constructs and stacks, the local stack and the CLI."""
