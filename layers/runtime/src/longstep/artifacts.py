"""Content-addressed storage of large outputs in S3.

The same bytes always land under the same key (their sha256), so a document read twice is
stored once; records keep a reference and a short preview instead of the content.
"""

from __future__ import annotations

import hashlib
from typing import Any

from longstep.messages import canonical_json

PREVIEW_CHARS = 500
ARTIFACT_PREFIX = "artifacts/sha256/"


class ArtifactStore:
    """Puts and gets artifacts in one bucket.

    Args:
        bucket: the artifacts bucket.
        client: a boto3 S3 client.
    """

    def __init__(self, bucket: str, client: Any) -> None:
        self.bucket = bucket
        self.client = client

    def put(self, data: bytes, content_type: str = "application/json") -> dict[str, Any]:
        """Store ``data`` under its sha256; return its reference (uri, sha256, size)."""
        digest = hashlib.sha256(data).hexdigest()
        key = f"{ARTIFACT_PREFIX}{digest}"
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)
        return {"uri": f"s3://{self.bucket}/{key}", "sha256": digest, "bytes": len(data)}

    def get(self, uri: str) -> bytes:
        """The bytes of an artifact by its ``s3://`` uri."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()


def offload_if_large(result: Any, artifacts: ArtifactStore, threshold_bytes: int) -> Any:
    """Replace a tool result's content by an S3 reference when its JSON exceeds the threshold.

    The model keeps the status, the reference and a preview of the content.
    """
    text = canonical_json(result.get("content"))
    data = text.encode("utf-8")
    if len(data) <= threshold_bytes:
        return result
    ref = artifacts.put(data)
    return {
        "status": result["status"],
        "content": {"offloaded": ref, "preview": text[:PREVIEW_CHARS], "note": "content stored in S3; preview shown"},
    }
