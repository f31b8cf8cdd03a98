"""The one codec of DynamoDB items: typed values, sizes by DynamoDB's rules, JSON payloads."""

import json

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
