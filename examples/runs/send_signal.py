"""Signal a run through EventBridge: an event of source ``longstep.signal`` on the stack's signal bus."""

import json

import boto3


def send_signal(bus: str, run_id: str, event: str, payload: dict, events=None) -> str:
    """Put the signal on ``bus`` (the stack output ``SignalBusName``); EventBridge's id for the event.

    The caller must be one of the principals named in ``longstep.signal_principals``.
    """
    events = events or boto3.client("events")
    response = events.put_events(
        Entries=[
            {
                "EventBusName": bus,
                "Source": "longstep.signal",  # the rule matches this source and detail-type
                "DetailType": "Longstep Signal",
                "Detail": json.dumps({"run_id": run_id, "event": event, "payload": payload}),
            }
        ]
    )
    return response["Entries"][0]["EventId"]
