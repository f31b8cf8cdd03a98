"""The anchor of issue 28's local speed target, as the issue names it: moto's engine running a
trivial 400-step loop, on stock moto (none of Longstep's patches: this process never imports the
local stack), in a process of its own.

Run as ``python -m bench.speed.anchor``: prints one JSON line, the loop's definition as the bench
runs it in the local stack too (``bench.speed.run.LOOP``), a warm-up execution, then the measured
one (CPU seconds of the process, every thread, from ``StartExecution`` to the end).
"""

from __future__ import annotations

import json
import time
from typing import Any

STEPS = 400
LOOP = {
    "StartAt": "Count",
    "States": {
        "Count": {"Type": "Pass", "Parameters": {"i.$": "States.MathAdd($.i, 1)"}, "Next": "More"},
        "More": {"Type": "Choice", "Choices": [{"Variable": "$.i", "NumericLessThan": STEPS, "Next": "Count"}], "Default": "Done"},
        "Done": {"Type": "Succeed"},
    },
}


def loop_once(sfn: Any, arn: str, name: str) -> dict[str, Any]:
    """One execution of the loop to its end: CPU and wall seconds; raises unless it counted to STEPS."""
    cpu, wall = time.process_time(), time.perf_counter()
    execution = sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps({"i": 0}))["executionArn"]
    deadline = time.monotonic() + 600
    while True:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.02)  # bounded polling (a deadline above), as a user of moto would wait
    if described["status"] != "SUCCEEDED" or json.loads(described["output"])["i"] != STEPS:
        raise RuntimeError(f"moto loop: {described['status']} {described.get('output')}")
    return {"cpu_seconds": time.process_time() - cpu, "wall_seconds": time.perf_counter() - wall}


def main() -> int:
    import boto3
    from moto import mock_aws

    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        role = "arn:aws:iam::123456789012:role/speed"
        arn = sfn.create_state_machine(name="speed-moto-loop", definition=json.dumps(LOOP), roleArn=role)["stateMachineArn"]
        warmup = loop_once(sfn, arn, "warmup")
        measured = loop_once(sfn, arn, "measured")
    print(
        json.dumps(
            {"steps": STEPS, "states_entered": 2 * STEPS + 1, "warmup": warmup, "measured": measured, "process_cpu_seconds": time.process_time()}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
