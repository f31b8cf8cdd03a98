"""Human waits: the run parks on a Step Functions task token, holding no compute, until a human answers.

- ``table``: the approvals table (one item per request, its status and id).
- ``requests``: making approval requests, and the views approvers see.
- ``decisions``: an approver's decision, recorded once, handed to the waiting task.
- ``notifications``: approvers hear of each request on an SNS topic.
- ``escalations``: a failed step waits for a human to retry, skip or abort it.
- ``waiting``: parked records in the checkpoint table (escalations).
- ``signals``: signals for ``wait_for`` event waits.
- ``service``: the approval API's service layer (the CLI calls it too); ``api``: its HTTP routes.
"""
