"""The saver's items: their keys in the table, and serialized values packed into attributes.

One partition per LangGraph thread (``pk`` = ``lg#<thread_id>``; a Longstep run id never holds a
``#``, so the saver may share Longstep's checkpoint table), and in it, by sort key:

* ``c#<ns>#<checkpoint_id>``: a checkpoint (without its channel values), its metadata, its parent;
* ``c#<ns>#<checkpoint_id>#w#<task_id>#<idx>``: a pending write of that checkpoint, which sorts
  right after it, so one Query reads a checkpoint and its writes;
* ``b#<ns>#<channel>#<version>``: a channel's value at a version, written once and shared by every
  checkpoint that holds that version (LangGraph's blob model).

Namespaces, ids and channel names are escaped (``%`` and ``#``), so a prefix names one namespace.
A serialized value (the serializer's ``(type, bytes)``) is stored as bytes, zlib-compressed when
that makes it smaller (as ``longstep.codec`` does for the runtime's records), or in S3 when it is
larger than the offload threshold: content-addressed under the thread's own prefix, so a value
written twice in a thread is stored once and deleting a thread deletes its objects.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from longstep.codec import COMPRESS_FROM_BYTES, item_size
from longstep.errors import RecordTooLargeError

PK_PREFIX = "lg#"
# DynamoDB's item limit is 400 KB, attribute names and values counted
# (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html);
# a payload larger than the offload threshold goes to S3, and no item is written above this.
MAX_ITEM_BYTES = 350 * 1024
DEFAULT_OFFLOAD_BYTES = 64 * 1024
S3_PREFIX = "langgraph/threads/"
EMPTY = "empty"


def escape(part: str) -> str:
    """A key part with ``%`` and ``#`` escaped: it holds no ``#``, so ``#`` separates parts."""
    return part.replace("%", "%25").replace("#", "%23")


def pk(thread_id: str) -> str:
    """The partition key of a thread."""
    return f"{PK_PREFIX}{thread_id}"


def checkpoints_prefix(ns: str | None) -> str:
    """The sort key prefix of a namespace's checkpoints and writes (every namespace: None)."""
    return "c#" if ns is None else f"c#{escape(ns)}#"


def checkpoint_sk(ns: str, checkpoint_id: str) -> str:
    """The sort key of a checkpoint."""
    return f"c#{escape(ns)}#{escape(checkpoint_id)}"


def write_sk(ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    """The sort key of a pending write: its checkpoint's key, then ``#w#``."""
    return f"{checkpoint_sk(ns, checkpoint_id)}#w#{escape(task_id)}#{idx}"


def blob_sk(ns: str, channel: str, version: Any) -> str:
    """The sort key of a channel's value at a version."""
    return f"b#{escape(ns)}#{escape(channel)}#{escape(str(version))}"


def owner_of_write(sk: str) -> str:
    """The sort key of the checkpoint a write's sort key belongs to."""
    return sk.split("#w#", 1)[0]


def is_checkpoint(sk: str) -> bool:
    """Whether a sort key is a checkpoint's (not a write's, nor a blob's)."""
    return sk.startswith("c#") and "#w#" not in sk


def thread_folder(thread_id: str) -> str:
    """The S3 prefix of a thread's offloaded values."""
    return f"{S3_PREFIX}{hashlib.sha256(thread_id.encode('utf-8')).hexdigest()[:32]}/"


@dataclass
class Offload:
    """Where values over ``threshold`` bytes go: an S3 bucket (None: nowhere, they are refused).

    Attributes:
        s3: a boto3 S3 client, or None.
        bucket: the bucket, or None.
        threshold: payloads larger than this (after compression) are put in S3.
    """

    s3: Any
    bucket: str | None
    threshold: int = DEFAULT_OFFLOAD_BYTES

    def put(self, thread_id: str, data: bytes) -> str:
        """Store ``data`` (already packed) under its sha256 in the thread's folder; its key."""
        if self.bucket is None:
            raise RecordTooLargeError(f"a LangGraph value of {len(data)} bytes needs S3: give LongstepSaver a bucket")
        key = f"{thread_folder(thread_id)}{hashlib.sha256(data).hexdigest()}"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
        return key

    def get(self, key: str) -> bytes:
        """The bytes stored under ``key``."""
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()

    def copy(self, key: str, thread_id: str) -> str:
        """Copy an object into another thread's folder; its new key."""
        new = f"{thread_folder(thread_id)}{key.rsplit('/', 1)[1]}"
        self.s3.copy_object(Bucket=self.bucket, Key=new, CopySource={"Bucket": self.bucket, "Key": key})
        return new

    def delete(self, keys: list[str]) -> None:
        """Delete objects, at most 1,000 a request
        (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html)."""
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": k} for k in keys[start : start + 1000]]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})

    def keys_of(self, thread_id: str) -> list[str]:
        """Every object of a thread's folder (ListObjectsV2, page by page)."""
        if self.bucket is None:
            return []
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=thread_folder(thread_id))
        return [obj["Key"] for page in pages for obj in page.get("Contents", [])]


def pack(name: str, typed: tuple[str, bytes], thread_id: str, offload: Offload) -> dict[str, dict[str, Any]]:
    """A serialized value as attributes: ``<name>t`` its type, and its bytes as ``<name>`` (raw),
    ``<name>z`` (zlib) or ``<name>s`` (the S3 key of the zlib or raw bytes, ``<name>sz`` saying which)."""
    kind, data = typed
    attrs: dict[str, dict[str, Any]] = {f"{name}t": {"S": kind}}
    body, packed = data, False
    if len(data) >= COMPRESS_FROM_BYTES:
        squeezed = zlib.compress(data, 6)
        if len(squeezed) + 1 < len(data):
            body, packed = squeezed, True
    if len(body) > offload.threshold:
        attrs[f"{name}s"] = {"S": offload.put(thread_id, body)}
        if packed:
            attrs[f"{name}sz"] = {"BOOL": True}
    elif body:
        attrs[f"{name}z" if packed else name] = {"B": body}
    return attrs


def unpack(name: str, item: Mapping[str, Any], offload: Offload) -> tuple[str, bytes]:
    """The ``(type, bytes)`` that ``pack`` stored under ``name`` in a typed item."""
    kind = item[f"{name}t"]["S"]
    if f"{name}s" in item:
        body = offload.get(item[f"{name}s"]["S"])
        return kind, zlib.decompress(body) if f"{name}sz" in item else body
    if f"{name}z" in item:
        return kind, zlib.decompress(item[f"{name}z"]["B"])
    return kind, item[name]["B"] if name in item else b""


PAYLOADS = ("c", "m", "v")  # a checkpoint, its metadata; a blob's or a write's value


def s3_keys(item: Mapping[str, Any]) -> list[str]:
    """The S3 keys an item's payloads are stored under."""
    return [item[f"{name}s"]["S"] for name in PAYLOADS if f"{name}s" in item]


def checked(item: dict[str, Any]) -> dict[str, Any]:
    """``item``, refused when over ``MAX_ITEM_BYTES`` (DynamoDB refuses items over 400 KB)."""
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise RecordTooLargeError(f"LangGraph item {item['sk']['S']} is {size} bytes, over {MAX_ITEM_BYTES}")
    return item
