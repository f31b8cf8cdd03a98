"""Signal a run through EventBridge: an event of detail-type ``Longstep Signal`` on the default bus."""

import json

import boto3


def send_signal(run_id: str, event: str, payload: dict, events=None) -> str:
    """Put the signal on the default bus; EventBridge's id for the event."""
    events = events or boto3.client("events")
    response = events.put_events(
        Entries=[
            {
                "Source": "com.example.ci",
                "DetailType": "Longstep Signal",  # the rule matches this detail-type, whatever the source
                "Detail": json.dumps({"run_id": run_id, "event": event, "payload": payload}),
            }
        ]
    )
    return response["Entries"][0]["EventId"]
