"""The local stack: the synthesized template deployed into moto, with Lambda run in-process.

Nothing here ships in the Lambda layer. It reads only what ``cdk synth`` produced.
"""
