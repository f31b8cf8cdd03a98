"""Model providers: Bedrock Converse, and a scripted provider for local runs and tests."""

from longstep.models.base import ModelProvider, ModelReply

__all__ = ["ModelProvider", "ModelReply"]
