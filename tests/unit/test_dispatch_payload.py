"""The local Lambda dispatcher: an invoke's payload goes through the depth-capped parser (a payload
nested thousands deep is the function's Runtime.UnmarshalError, and the handler never runs; it
raised RecursionError out of moto's invoke before), and a handler that exits is Runtime.ExitError."""

from __future__ import annotations

import json
from types import SimpleNamespace

from longstep_kit.local.dispatch import Dispatcher


def _fn():
    return SimpleNamespace(handler="no_such_module_here.lambda_handler", code={}, function_name="F", environment_vars={}, timeout=3, role=None)


def test_a_deep_payload_is_an_unmarshal_error_naming_the_payload():
    dispatcher, headers = Dispatcher(), {}
    body = ("[" * 5000 + "]" * 5000).encode()
    answer = json.loads(dispatcher.invoke(_fn(), body, headers))
    assert answer["errorType"] == "Runtime.UnmarshalError"
    assert "Payload" in answer["errorMessage"] and "32 levels" in answer["errorMessage"]
    assert headers["x-amz-function-error"] == "Unhandled"
    assert dispatcher.invocations == []  # the handler was not imported, let alone called


def test_a_shallow_payload_still_reaches_the_handler():
    dispatcher, headers = Dispatcher(), {}
    answer = json.loads(dispatcher.invoke(_fn(), json.dumps({"a": [[1]]}).encode(), headers))
    assert answer["errorType"] == "ModuleNotFoundError"  # it got as far as importing the handler
    assert dispatcher.invocations[0].event == {"a": [[1]]}


def test_a_handler_that_exits_is_runtime_exit_error(tmp_path, monkeypatch):
    (tmp_path / "exits_here.py").write_text("import sys\n\ndef lambda_handler(event, context):\n    sys.exit(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = SimpleNamespace(handler="exits_here.lambda_handler", code={}, function_name="F", environment_vars={}, timeout=3, role=None)
    dispatcher, headers = Dispatcher(), {}
    answer = json.loads(dispatcher.invoke(fn, b"{}", headers))  # SystemExit escaped the dispatcher before
    assert answer == {"errorType": "Runtime.ExitError", "errorMessage": "Runtime exited with error: exit status 1"}
    assert headers["x-amz-function-error"] == "Unhandled"
