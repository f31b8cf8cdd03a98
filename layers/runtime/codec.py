"""DynamoDB items: plain Python values to typed attribute values and back, and their sizes.

The one codec of the runtime and the operator views: the stores write with ``attributes``, read
with ``plain``, and check the item size limit with ``item_size``; JSON payloads go through
``encode_json`` (compressed when that makes them smaller) and ``decode_json``.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Mapping

# Payloads under this many bytes are stored as plain JSON without trying: zlib's own 6 bytes
# (header and checksum) and the ``_z`` of the name leave nothing saved on so little text. Above
# it a payload is compressed whenever that makes the item smaller: a model's short reply of a
# few hundred bytes packs to about two thirds (issue 28's per-record overhead). The format is
# the one every reader has decoded since records were first compressed (``decode_json``).
COMPRESS_FROM_BYTES = 64
# What the compressed form's name (``name + "_z"``) adds to the item.
_PACKED_NAME_BYTES = len("_z")

# A preset dictionary (zlib's ``zdict``) of the runtime's own payload shapes: a tool result
# (``longstep.tools.executor.success``/``failure``, an offloaded output's reference and preview:
# ``longstep.artifacts``) and a model reply (``longstep.models.base.ModelReply.to_record`` with
# its ``at``). A payload of a few hundred bytes spends a good part of its compressed bytes on
# these keys; packed against them it does not (about 50 bytes a step record: issue 28). No
# content of any run is in it. Strings used most sit at its end, where zlib finds them cheapest.
# A payload packed against it names it in its zlib header (FDICT and the dictionary's Adler-32),
# so ``decode_json`` knows which to unpack it with: never change these bytes, add another.
_SHAPES_1 = (
    b'{"status":"error","content":{"error":"'
    b'"content":{"offloaded":{"uri":"artifact://sha256/","sha256":"","bytes":},"preview":"'
    b'","note":"content stored in S3; preview shown"}}'
    b'"}]},"stop_reason":"end_turn","usage":{"inputTokens":'
    b'{"status":"success","content":"'
    b'{"message":{"role":"assistant","content":[{"text":"'
    b'"},{"toolUse":{"toolUseId":"'
    b'","name":"'
    b'","input":{"'
    b'"}}}]},"stop_reason":"tool_use","usage":{"inputTokens":'
    b',"outputTokens":'
    b'},"at":17'
)
# Every dictionary a payload may be packed against, by its zlib id; the one this code packs with.
DICTIONARIES = {zlib.adler32(_SHAPES_1): _SHAPES_1}
PACKING_DICTIONARY = _SHAPES_1
_FDICT = 0x20  # the zlib header's flag: a preset dictionary's id follows the two header bytes


def attribute(value: Any) -> dict[str, Any]:
    """One plain value as a typed attribute value: booleans, bytes and numbers keep their type;
    strings stay strings; anything else is stored as its JSON text."""
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, bytes):
        return {"B": value}
    if isinstance(value, (int, float)):
        return {"N": str(value)}
    return {"S": value if isinstance(value, str) else json.dumps(value)}


def attributes(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Plain values by name as typed attribute values (see ``attribute``)."""
    return {name: attribute(value) for name, value in values.items()}


def number(raw: str) -> int | float:
    """A DynamoDB number (its decimal text) as an int when it is one, else a float."""
    return float(raw) if any(c in raw for c in ".eE") else int(raw)


def plain(item: Mapping[str, Any]) -> dict[str, Any]:
    """A typed item (as boto3's low-level client returns it) as plain Python values.

    Numbers become int or float; strings, binaries and booleans stay as they are (JSON text
    stays text: the caller knows which attributes hold JSON).
    """
    out: dict[str, Any] = {}
    for name, value in item.items():
        ((kind, raw),) = value.items()
        out[name] = number(raw) if kind == "N" else raw
    return out


# Sizes by the rules of "DynamoDB item sizes and formats":
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html


def item_size(item: Mapping[str, Any]) -> int:
    """A typed item's size as DynamoDB counts it (the 400 KB limit, capacity units, storage):
    the UTF-8 length of every attribute name plus the size of its value."""
    return sum(len(name.encode("utf-8")) + attribute_size(value) for name, value in item.items())


def attribute_size(value: Mapping[str, Any]) -> int:
    """The size of one typed attribute value: strings in UTF-8, binaries by their raw length,
    numbers one byte per two significant digits plus one, lists and maps with their overhead."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(raw.encode("utf-8"))
    if kind == "B":
        return len(raw)
    if kind == "N":
        return _number_size(str(raw))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(1 + attribute_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode("utf-8")) + attribute_size(v) for k, v in raw.items())
    if kind == "NS":
        return sum(_number_size(str(n)) for n in raw)
    if kind in ("SS", "BS"):
        return sum(len(v) if isinstance(v, bytes) else len(v.encode("utf-8")) for v in raw)
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def _number_size(raw: str) -> int:
    # Leading and trailing zeroes are trimmed; the exponent is not a digit of the value.
    digits = raw.lstrip("-").split("e")[0].split("E")[0].replace(".", "").strip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def encode_json(name: str, value: Any) -> dict[str, Any]:
    """``{name: json}``, or ``{name + "_z": zlib(json)}`` when that makes the item smaller (its
    longer name counted)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    raw = text.encode("utf-8")
    if len(raw) >= COMPRESS_FROM_BYTES:
        packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY, PACKING_DICTIONARY)
        packed = min(packer.compress(raw) + packer.flush(), zlib.compress(raw, 6), key=len)
        if len(packed) + _PACKED_NAME_BYTES < len(raw):
            return {f"{name}_z": packed}
    return {name: text}


def uses_dictionary(packed: bytes) -> bool:
    """Whether a compressed payload (``encode_json``'s ``_z``) was packed against a dictionary."""
    return len(packed) >= 6 and bool(packed[1] & _FDICT)


def without_dictionary(value: Any) -> Any:
    """``value``, or, for a payload packed against a dictionary, the same payload compressed
    without one: what a runtime of schema version 4 or older reads (``longstep.store`` writes
    it into a record of such a version)."""
    if isinstance(value, bytes) and uses_dictionary(value):
        return zlib.compress(_unpack("payload", value), 6)
    return value


def _unpack(name: str, packed: bytes) -> bytes:
    if not uses_dictionary(packed):
        return zlib.decompress(packed)
    ident = int.from_bytes(packed[2:6], "big")
    dictionary = DICTIONARIES.get(ident)
    if dictionary is None:
        raise ValueError(f"{name}_z: packed against dictionary {ident:08x}, which this runtime does not know")
    unpacker = zlib.decompressobj(zlib.MAX_WBITS, dictionary)
    return unpacker.decompress(packed) + unpacker.flush()


def decode_json(name: str, item: Mapping[str, Any]) -> Any:
    """The value ``encode_json`` stored under ``name`` in a plain ``item``."""
    if f"{name}_z" in item:
        return json.loads(_unpack(name, item[f"{name}_z"]).decode("utf-8"))
    return json.loads(item[name])
