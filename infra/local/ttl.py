"""DynamoDB Time to Live on the local stack, run by the virtual clock.

moto stores a table's TTL setting but never deletes an item, and its CloudFormation ignores a
table's ``TimeToLiveSpecification``. DynamoDB deletes an item once the epoch seconds in its TTL
attribute are less than the current time, "typically within two days of expiration"
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html). The
local stack deletes it as soon as the virtual clock passes that instant: the strict case, so a
record a live run needs and that expires too early fails locally.
"""

from __future__ import annotations

from typing import Any

from longstep_kit.local.atomicity import dynamodb_lock


def apply_template_ttl(cfn: Any, ddb: Any, stack_name: str, template: dict[str, Any]) -> dict[str, str]:
    """Give each deployed table the ``TimeToLiveSpecification`` its template declares.

    Returns:
        table name -> TTL attribute, for the tables that have one.
    """
    applied: dict[str, str] = {}
    for logical_id, resource in template.get("Resources", {}).items():
        spec = resource.get("Properties", {}).get("TimeToLiveSpecification") if resource.get("Type") == "AWS::DynamoDB::Table" else None
        if not spec or not spec.get("Enabled"):
            continue
        table = cfn.describe_stack_resource(StackName=stack_name, LogicalResourceId=logical_id)["StackResourceDetail"]["PhysicalResourceId"]
        ddb.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": spec["AttributeName"]})
        applied[table] = spec["AttributeName"]
    return applied


def delete_expired(account: str, region: str, now: float) -> int:
    """Delete every item whose TTL attribute (a Number) is less than ``now``; how many."""
    from moto.dynamodb.models import dynamodb_backends

    deleted = 0
    with dynamodb_lock():
        for table in list(dynamodb_backends[account][region].tables.values()):
            if table.ttl.get("TimeToLiveStatus") != "ENABLED":
                continue
            attribute = table.ttl["AttributeName"]
            for item in table.all_items():
                value = item.attrs.get(attribute)
                # DynamoDB ignores a TTL attribute that is not a Number.
                if value is not None and value.type == "N" and float(value.value) < now:
                    table.delete_item(item.hash_key, item.range_key)
                    deleted += 1
    return deleted
