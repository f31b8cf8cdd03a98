"""Follow a run's events from Python until it ends, and send it a message along the way."""

from longstep_kit.client import Client


def follow_and_steer(client: Client, run_id: str, message: str, after_turn: int = 2) -> list[dict]:
    """Print each event of ``run_id`` as it happens; after turn ``after_turn``'s reply, send ``message``.

    ``client`` is ``Client.for_stack("Longstep")`` on AWS (your credentials), or one made with a
    local server's clients. A dropped follow resumes with ``client.follow(run_id, after=last_offset)``.
    """
    seen = []
    for event in client.follow(run_id):
        print(event["offset"], event["type"], event.get("text", ""))
        seen.append(event)
        if event["type"] == "step.finished" and event.get("kind") == "model" and event["turn"] == after_turn:
            client.send(run_id, message)
    return seen
