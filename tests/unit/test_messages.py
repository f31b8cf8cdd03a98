"""Converse message helpers and the canonical transcript hash."""

import copy
import random

from longstep.messages import (
    canonical_json,
    text_of,
    tool_result_block,
    tool_uses,
    transcript_sha256,
    user_text,
)

HISTORY = [
    {"role": "user", "content": [{"text": "triage please"}]},
    {
        "role": "assistant",
        "content": [
            {"text": "looking"},
            {"toolUse": {"toolUseId": "t0c0", "name": "search_docs", "input": {"query": "crash", "limit": 3}}},
        ],
    },
    {"role": "user", "content": [{"toolResult": {"toolUseId": "t0c0", "content": [{"json": {"n": 1}}], "status": "success"}}]},
]


def _shuffle_keys(value, rng):
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffle_keys(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffle_keys(v, rng) for v in value]
    return value


def test_hash_is_stable_under_key_order():
    base = transcript_sha256(HISTORY)
    for seed in range(10):
        shuffled = _shuffle_keys(HISTORY, random.Random(seed))
        assert transcript_sha256(shuffled) == base


def test_hash_is_a_sha256_hex_digest():
    digest = transcript_sha256(HISTORY)
    assert len(digest) == 64
    int(digest, 16)


def test_hash_changes_when_content_changes():
    base = transcript_sha256(HISTORY)
    changed = copy.deepcopy(HISTORY)
    changed[1]["content"][1]["toolUse"]["input"]["limit"] = 4
    assert transcript_sha256(changed) != base


def test_hash_changes_when_message_order_changes():
    assert transcript_sha256(list(reversed(HISTORY))) != transcript_sha256(HISTORY)


def test_hash_distinguishes_types():
    assert transcript_sha256([{"a": 1}]) != transcript_sha256([{"a": "1"}])


def test_canonical_json_is_compact_sorted_and_keeps_unicode():
    text = canonical_json({"b": 1, "a": "é"})
    assert text == '{"a":"é","b":1}'


def test_user_text_is_a_user_message_with_one_text_block():
    msg = user_text("hello")
    assert msg["role"] == "user"
    assert text_of(msg) == "hello"
    assert tool_uses(msg) == []


def test_tool_uses_returns_tool_use_blocks_in_order():
    msg = {
        "role": "assistant",
        "content": [
            {"toolUse": {"toolUseId": "b", "name": "x", "input": {}}},
            {"text": "between"},
            {"toolUse": {"toolUseId": "a", "name": "y", "input": {}}},
        ],
    }
    assert [u["toolUseId"] for u in tool_uses(msg)] == ["b", "a"]


def test_text_of_joins_text_blocks_and_skips_others():
    msg = {"role": "assistant", "content": [{"text": "one"}, {"toolUse": {}}, {"text": "two"}]}
    assert text_of(msg) == "one\ntwo"
    assert text_of({"role": "assistant"}) == ""


def test_tool_result_block_success_with_dict():
    block = tool_result_block("id1", {"ok": True})["toolResult"]
    assert block["toolUseId"] == "id1"
    assert block["status"] == "success"
    assert block["content"] == [{"json": {"ok": True}}]


def test_tool_result_block_wraps_non_objects_and_marks_errors():
    block = tool_result_block("id2", [1, 2], is_error=True)["toolResult"]
    assert block["status"] == "error"
    (content,) = block["content"]
    assert isinstance(content["json"], dict)
    assert [1, 2] in content["json"].values()
