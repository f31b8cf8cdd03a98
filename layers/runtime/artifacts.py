"""Content-addressed storage of large outputs in S3.

The same bytes always land under the same key (their sha256), so a document read twice is
stored once; records keep a reference and a short preview instead of the content.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from longstep.messages import canonical_json

PREVIEW_CHARS = 500
ARTIFACT_PREFIX = "artifacts/sha256/"
ARTIFACT_SCHEME = "artifact://sha256/"


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
        """Store ``data`` under its sha256; return its reference (uri, sha256, size).

        The uri (``artifact://sha256/<hex>``) names the content, not the bucket, so a recorded
        transcript is the same in every deployment.
        """
        digest = hashlib.sha256(data).hexdigest()
        packed = zlib.compress(data, 6)
        if len(packed) < len(data):  # text compresses several-fold; the key still names the content
            body, extra = packed, {"ContentEncoding": "deflate"}
        else:
            body, extra = data, {}
        self.client.put_object(Bucket=self.bucket, Key=f"{ARTIFACT_PREFIX}{digest}", Body=body, ContentType=content_type, **extra)
        return {"uri": f"{ARTIFACT_SCHEME}{digest}", "sha256": digest, "bytes": len(data)}

    def get(self, uri: str) -> bytes:
        """The bytes of an artifact by its ``artifact://sha256/<hex>`` or ``s3://bucket/key`` uri."""
        if uri.startswith(ARTIFACT_SCHEME):
            bucket, key = self.bucket, ARTIFACT_PREFIX + uri.removeprefix(ARTIFACT_SCHEME)
        else:
            bucket, _, key = uri.removeprefix("s3://").partition("/")
        obj = self.client.get_object(Bucket=bucket, Key=key)
        body = obj["Body"].read()
        return zlib.decompress(body) if obj.get("ContentEncoding") == "deflate" else body


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
