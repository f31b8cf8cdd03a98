"""The one codec of DynamoDB items: typed values, sizes by DynamoDB's rules, JSON payloads."""

import json
import zlib

import pytest

from longstep import codec


def test_plain_values_round_trip_through_typed_attributes():
    values = {"s": "é text", "i": 42, "f": 1712345678.25, "b": b"\x00\x01", "t": True, "neg": -3}
    assert codec.plain(codec.attributes(values)) == values


def test_values_that_are_not_strings_are_stored_as_json_text():
    assert codec.attribute({"a": [1, 2]}) == {"S": '{"a": [1, 2]}'}


@pytest.mark.parametrize(("raw", "value"), [("1", 1), ("-7", -7), ("2.5", 2.5), ("1e-05", 1e-05), ("3E2", 300.0)])
def test_numbers_are_ints_when_they_are_integers(raw, value):
    assert codec.plain({"n": {"N": raw}})["n"] == value
    assert type(codec.plain({"n": {"N": raw}})["n"]) is type(value)


def test_item_size_follows_dynamodb_rules():
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
    item = {"pk": {"S": "run-1"}, "sk": {"S": "é"}, "n": {"N": "1234"}, "b": {"B": b"\x00" * 10}, "ok": {"BOOL": True}}
    assert codec.item_size(item) == (2 + 5) + (2 + 2) + (1 + 3) + (1 + 10) + (2 + 1)


@pytest.mark.parametrize(("raw", "size"), [("0", 2), ("12345", 4), ("00120", 2), ("-1.50", 2), ("1e10", 2)])
def test_a_number_counts_one_byte_per_two_significant_digits_plus_one(raw, size):
    assert codec.attribute_size({"N": raw}) == size


def test_lists_and_maps_carry_their_overhead():
    assert codec.attribute_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert codec.attribute_size({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1


def test_small_json_stays_text_and_large_json_is_compressed():
    small = codec.encode_json("result", {"a": 1})
    assert small == {"result": '{"a":1}'}
    large = codec.encode_json("result", {"text": "x" * 5_000})
    assert set(large) == {"result_z"} and len(large["result_z"]) < 5_000
    assert codec.decode_json("result", large) == {"text": "x" * 5_000}
    assert codec.decode_json("result", small) == {"a": 1}


def test_a_short_reply_is_compressed_when_that_makes_the_item_smaller():
    reply = {
        "message": {"role": "assistant", "content": [{"text": "Read the file, then run the tests on the file. " * 4}]},
        "stop_reason": "end_turn",
    }
    text = json.dumps(reply, separators=(",", ":"))
    assert codec.COMPRESS_FROM_BYTES <= len(text) < 512  # stored as text before issue 28
    packed = codec.encode_json("result", reply)
    assert set(packed) == {"result_z"} and len("result_z") + len(packed["result_z"]) < len("result") + len(text)
    assert codec.decode_json("result", packed) == reply
    # Text that compression would not shrink (with the longer name counted) stays text.
    noise = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(40))
    assert codec.encode_json("result", noise) == {"result": json.dumps(noise, ensure_ascii=False)}


def test_a_reply_is_packed_against_the_dictionary_and_reads_back_with_it():
    reply = {
        "message": {
            "role": "assistant",
            "content": [{"text": "Look at the parser."}, {"toolUse": {"toolUseId": "t1", "name": "grep", "input": {"pattern": "def parse"}}}],
        },
        "stop_reason": "tool_use",
        "usage": {"inputTokens": 1200, "outputTokens": 40},
        "at": 1796150260.0659537,
    }
    packed = codec.encode_json("result", reply)["result_z"]
    assert codec.uses_dictionary(packed) and len(packed) < len(zlib.compress(json.dumps(reply, separators=(",", ":")).encode(), 6))
    assert codec.decode_json("result", {"result_z": packed}) == reply
    # For a record of version 4 or older: the same payload, in the zlib every version reads.
    plain = codec.without_dictionary(packed)
    assert not codec.uses_dictionary(plain) and json.loads(zlib.decompress(plain)) == reply
    assert codec.without_dictionary("text") == "text"


def test_a_payload_packed_against_an_unknown_dictionary_is_a_clear_error():
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS, 8, zlib.Z_DEFAULT_STRATEGY, b"another dictionary")
    packed = packer.compress(b'{"a":1}') + packer.flush()
    with pytest.raises(ValueError, match=r"result_z: packed against dictionary [0-9a-f]{8}, which this runtime does not know"):
        codec.decode_json("result", {"result_z": packed})
