"""Which IAM action(s) and resource ARN(s) an API call needs (the mapping behind local IAM).

Actions and resources follow AWS's Service Authorization Reference
(https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html):
DynamoDB tables and their indexes (``table/T/index/I``), S3 objects and buckets (``ListBucket`` on
the bucket, with ``s3:prefix``), SNS topics, Step Functions state machines and executions,
Lambda functions, Secrets Manager secrets, KMS keys, Bedrock models and EventBridge buses. A call this module does
not know is checked as ``<service>:<Operation>`` on ``*``: unknown means refused, not waved through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# moto's Step Functions engine creates its clients with this access key
# (moto/stepfunctions/parser/asl/utils/boto_client.py): how its Lambda invokes are told apart.
ENGINE_ACCESS_KEY = "ak"


@dataclass
class Request:
    """One action on one resource that a call needs.

    Attributes:
        action: ``service:Action``.
        resource: the resource ARN.
        context: condition keys for this request (``s3:prefix``, ``dynamodb:LeadingKeys``: a list,
            for a multivalued key).
        enforced: False for a permission that only changes the answer (S3 ``ListBucket`` for a
            missing key), not whether the call may be made.
        denied_as: the (code, status) AWS answers when this permission is missing.
    """

    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)
    enforced: bool = True
    denied_as: tuple[str, int] | None = None


class MotoLookup:
    """What the mapping needs from moto's state: object existence, task tokens, secret and key ARNs."""

    def __init__(self, account: str, region: str) -> None:
        self.account, self.region = account, region

    def object_exists(self, bucket: str, key: str) -> bool:
        from moto.s3.models import s3_backends

        try:
            return s3_backends[self.account]["aws"].get_object(bucket, key) is not None
        except Exception:  # a missing bucket: the call fails on its own
            return True

    def machine_of_token(self, token: str) -> str | None:
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends

        # The executing engine's backend (moto/stepfunctions/parser/models.py), not CloudFormation's.
        backend = stepfunctions_parser_backends[self.account][self.region]
        for machine in backend.state_machines:
            for execution in getattr(machine, "executions", []):
                worker = getattr(execution, "exec_worker", None)
                pool = getattr(getattr(worker, "env", None), "callback_pool_manager", None)
                if pool is not None and pool.get(token) is not None:
                    return machine.arn
        return None

    def token_closed(self, token: str) -> bool:
        """Whether a task token's task is over (answered or timed out): AWS answers ``TaskTimedOut``."""
        from moto.stepfunctions.parser.models import stepfunctions_parser_backends

        from longstep_kit.local.asl_strictness import task_closed

        backend = stepfunctions_parser_backends[self.account][self.region]
        for machine in backend.state_machines:
            for execution in getattr(machine, "executions", []):
                worker = getattr(execution, "exec_worker", None)
                pool = getattr(getattr(worker, "env", None), "callback_pool_manager", None)
                endpoint = pool.get(token) if pool is not None else None
                if endpoint is not None:
                    return task_closed(endpoint)
        return False  # unknown tokens: moto answers InvalidToken itself

    def partition_key(self, table: str, index: str | None = None) -> str | None:
        """The partition key attribute of a table (or of one of its indexes); None if unknown."""
        from moto.dynamodb.models import dynamodb_backends

        try:
            found = dynamodb_backends[self.account][self.region].get_table(table)
        except Exception:  # a missing table: the call fails on its own
            return None
        schema = found.schema
        if index:
            indexes = [i for i in (*found.global_indexes, *found.indexes) if i.name == index]
            schema = indexes[0].schema if indexes else []
        return next((k["AttributeName"] for k in schema if k["KeyType"] == "HASH"), None)

    def secret_arn(self, secret_id: str) -> str:
        if secret_id.startswith("arn:"):
            return secret_id
        from moto.secretsmanager.models import secretsmanager_backends

        try:
            return secretsmanager_backends[self.account][self.region].secrets[secret_id].arn
        except Exception:
            return f"arn:aws:secretsmanager:{self.region}:{self.account}:secret:{secret_id}"

    def key_arn(self, key_id: str) -> str:
        if key_id.startswith("arn:") and ":key/" in key_id:
            return key_id
        from moto.kms.models import kms_backends

        try:
            backend = kms_backends[self.account][self.region]
            return backend.describe_key(key_id).arn
        except Exception:
            return f"arn:aws:kms:{self.region}:{self.account}:key/{key_id}"


def requests_for(service: str, operation: str, params: dict[str, Any], region: str, account: str, lookup: MotoLookup | None) -> list[Request]:
    """The permissions one call needs, in the order AWS would check them."""
    mapper = _MAPPERS.get(service)
    found = mapper(operation, params, region, account, lookup) if mapper else None
    return found if found is not None else [Request(f"{service}:{operation}", "*")]


def _dynamodb(operation: str, params: dict[str, Any], region: str, account: str, lookup: Any) -> list[Request] | None:
    def table(name: str) -> str:
        return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"

    def request(action: str, name: str, body: dict[str, Any], index: str | None = None) -> Request:
        resource = table(name) + (f"/index/{index}" if index else "")
        return Request(action, resource, _leading_keys(lookup, name.rsplit("/", 1)[-1], index, action.partition(":")[2], body))

    if operation in ("BatchGetItem", "BatchWriteItem"):
        action = "dynamodb:BatchGetItem" if operation == "BatchGetItem" else "dynamodb:BatchWriteItem"
        return [request(action, name, body) for name, body in params.get("RequestItems", {}).items()]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        # Each element needs its own action (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
        names = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
        return [
            request(f"dynamodb:{names[kind]}", body["TableName"], body) for item in params.get("TransactItems", []) for kind, body in item.items()
        ]
    if "TableName" not in params:
        return None
    return [request(f"dynamodb:{operation}", params["TableName"], params, params.get("IndexName"))]


def _leading_keys(lookup: MotoLookup | None, name: str, index: str | None, action: str, body: Any) -> dict[str, Any]:
    """``dynamodb:LeadingKeys``: the partition key values the request touches (a multivalued key).

    The item's (PutItem), the key's (GetItem, UpdateItem, DeleteItem) or, for Query, the value
    the key condition sets the partition key to; a Scan touches no single partition and carries
    none (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html).
    """
    attribute = lookup.partition_key(name, index) if lookup is not None else None
    if attribute is None:
        return {}
    values: list[Any] = []
    if action == "BatchWriteItem":  # the table's write requests
        values = [(w.get("PutRequest", {}).get("Item") or w.get("DeleteRequest", {}).get("Key") or {}).get(attribute) for w in body]
    elif action == "PutItem":
        values = [body.get("Item", {}).get(attribute)]
    elif "Key" in body:
        values = [body["Key"].get(attribute)]
    elif "Keys" in body:  # BatchGetItem
        values = [key.get(attribute) for key in body["Keys"]]
    elif action == "Query":
        values = [_queried_partition(attribute, body)]
    keys = [next(iter(v.values())) for v in values if isinstance(v, dict) and v]
    return {"dynamodb:LeadingKeys": [str(k) for k in keys]}


def _queried_partition(attribute: str, body: dict[str, Any]) -> Any:
    """The value a Query's key condition sets the partition key to (``#pk = :v``, either side)."""
    if "KeyConditions" in body:  # the legacy parameter
        condition = body["KeyConditions"].get(attribute) or {}
        return (condition.get("AttributeValueList") or [None])[0]
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    expression = body.get("KeyConditionExpression") or ""
    for left, right in re.findall(r"([#:]?[A-Za-z0-9_]+)\s*=\s*([#:]?[A-Za-z0-9_]+)", expression):
        name, value = (left, right) if right.startswith(":") else (right, left)
        if value.startswith(":") and names.get(name, name) == attribute:
            return values.get(value)
    return None


def _s3(operation: str, params: dict[str, Any], region: str, account: str, lookup: MotoLookup | None) -> list[Request] | None:
    bucket, key = params.get("Bucket"), params.get("Key")
    if bucket is None:
        return None
    bucket_arn = f"arn:aws:s3:::{bucket}"
    if operation in ("GetObject", "HeadObject"):
        requests = [Request("s3:GetObject", f"{bucket_arn}/{key}")]
        if lookup is not None and not lookup.object_exists(bucket, key):
            # A missing key is NoSuchKey only with ListBucket; otherwise 403
            # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
            requests.append(Request("s3:ListBucket", bucket_arn, {"s3:prefix": key}, enforced=False, denied_as=("AccessDenied", 403)))
        return requests
    objects = {"PutObject": "s3:PutObject", "DeleteObject": "s3:DeleteObject", "GetObjectTagging": "s3:GetObjectTagging"}
    if operation in objects:
        return [Request(objects[operation], f"{bucket_arn}/{key}")]
    if operation == "CopyObject":
        source = params.get("CopySource")
        source = f"{source['Bucket']}/{source['Key']}" if isinstance(source, dict) else str(source).lstrip("/")
        return [Request("s3:GetObject", f"arn:aws:s3:::{source}"), Request("s3:PutObject", f"{bucket_arn}/{key}")]
    if operation == "DeleteObjects":
        return [Request("s3:DeleteObject", f"{bucket_arn}/{o['Key']}") for o in params.get("Delete", {}).get("Objects", [])]
    if operation in ("ListObjects", "ListObjectsV2", "ListObjectVersions"):
        return [Request("s3:ListBucket", bucket_arn, {"s3:prefix": params.get("Prefix", "")})]
    return [Request(f"s3:{operation}", bucket_arn)]


def _sns(operation: str, params: dict[str, Any], region: str, account: str, lookup: Any) -> list[Request] | None:
    topic = params.get("TopicArn") or params.get("TargetArn")
    return [Request(f"sns:{operation}", topic)] if topic else None


def _states(operation: str, params: dict[str, Any], region: str, account: str, lookup: MotoLookup | None) -> list[Request] | None:
    if operation in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
        # Granted on the state machine whose execution issued the token (CDK's grantTaskResponse).
        machine = lookup.machine_of_token(params.get("taskToken", "")) if lookup else None
        return [Request(f"states:{operation}", machine or f"arn:aws:states:{region}:{account}:stateMachine:*")]
    machine = params.get("stateMachineArn") or params.get("stateMachineAliasArn") or params.get("stateMachineVersionArn")
    if machine:
        # Versions and aliases are authorized on the state machine's own ARN:
        # https://docs.aws.amazon.com/step-functions/latest/dg/auth-version-alias.html
        return [Request(f"states:{operation}", ":".join(machine.split(":")[:7]))]
    if "executionArn" in params:
        return [Request(f"states:{operation}", params["executionArn"])]
    return None


def _lambda(operation: str, params: dict[str, Any], region: str, account: str, lookup: Any) -> list[Request] | None:
    name = params.get("FunctionName")
    if not name:
        return None
    arn = name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{account}:function:{name}"
    if params.get("Qualifier"):
        arn += f":{params['Qualifier']}"
    action = "lambda:InvokeFunction" if operation in ("Invoke", "InvokeAsync") else f"lambda:{operation}"
    return [Request(action, arn)]


def _secretsmanager(operation: str, params: dict[str, Any], region: str, account: str, lookup: MotoLookup | None) -> list[Request] | None:
    secret = params.get("SecretId")
    if not secret:
        return None
    return [Request(f"secretsmanager:{operation}", lookup.secret_arn(secret) if lookup else secret)]


def _kms(operation: str, params: dict[str, Any], region: str, account: str, lookup: MotoLookup | None) -> list[Request] | None:
    key = params.get("KeyId")
    if not key:
        return None
    return [Request(f"kms:{operation}", lookup.key_arn(key) if lookup else key)]


def bedrock_model_arn(model_id: str, region: str, account: str) -> str:
    """A model id as the ARN IAM sees: an inference profile (``us.``...) or a foundation model."""
    from longstep_kit.bedrock_access import profile_arn, split_profile

    if model_id.startswith("arn:"):
        return model_id
    if split_profile(model_id)[0] is not None:
        return profile_arn(model_id, region=region, account=account)
    return f"arn:aws:bedrock:{region}::foundation-model/{model_id}"


def _bedrock(operation: str, params: dict[str, Any], region: str, account: str, lookup: Any) -> list[Request] | None:
    model = params.get("modelId")
    if not model:
        return None
    # Converse needs bedrock:InvokeModel; ConverseStream, InvokeModelWithResponseStream
    # (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html).
    streaming = operation in ("ConverseStream", "InvokeModelWithResponseStream")
    action = "bedrock:InvokeModelWithResponseStream" if streaming else "bedrock:InvokeModel"
    return bedrock_requests(action, model, region, account)


# Regions a profile's requests are checked in locally, per geography: more than any profile
# routes to today, standing for the Regions AWS may add; a grant must not depend on the list.
ROUTED_REGIONS: dict[str, tuple[str, ...]] = {
    "us": ("us-east-1", "us-east-2", "us-west-1", "us-west-2"),
    "eu": ("eu-central-1", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-3"),
    "apac": ("ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2"),
    "jp": ("ap-northeast-1", "ap-northeast-3"),
    "au": ("ap-southeast-2", "ap-southeast-4"),
    "ca": ("ca-central-1", "ca-west-1"),
    "us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "global": ("us-east-1", "eu-west-1", "ap-northeast-1", "sa-east-1"),
}


def bedrock_requests(action: str, model_id: str, region: str, account: str) -> list[Request]:
    """What a call on ``model_id`` is authorized against: the model or profile, and for a
    cross-Region profile the foundation model in each Region it may route to, each check
    carrying the profile's ARN as ``bedrock:InferenceProfileArn``.

    AWS checks the foundation model in the Region the request is routed to; which one is not the
    caller's choice, so the strict case is all of them: the source Region and every Region of
    ``ROUTED_REGIONS`` for the geography
    (https://docs.aws.amazon.com/bedrock/latest/userguide/geographic-cross-region-inference.html).
    """
    from longstep_kit.bedrock_access import PROFILE_CONDITION_KEY, split_profile

    arn = bedrock_model_arn(model_id, region, account)
    prefix, base = split_profile(model_id)
    if model_id.startswith("arn:") or prefix is None:
        return [Request(action, arn)]
    regions = sorted({region, *ROUTED_REGIONS.get(prefix, ())})
    context = {PROFILE_CONDITION_KEY: arn}
    return [Request(action, arn), *(Request(action, f"arn:aws:bedrock:{r}::foundation-model/{base}", dict(context)) for r in regions)]


def _sqs(operation: str, params: dict[str, Any], region: str, account: str, lookup: Any) -> list[Request] | None:
    url = params.get("QueueUrl")
    if not url:
        return None
    return [Request(f"sqs:{operation.removesuffix('Batch')}", f"arn:aws:sqs:{region}:{account}:{url.rstrip('/').rsplit('/', 1)[-1]}")]


def _events(operation: str, params: dict[str, Any], region: str, account: str, lookup: Any) -> list[Request] | None:
    if operation != "PutEvents":
        return None
    # One request per bus, with the entries' sources and detail-types (multivalued keys):
    # https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html
    buses: dict[str, list[dict[str, Any]]] = {}
    for entry in params.get("Entries", []):
        name = entry.get("EventBusName") or "default"
        arn = name if name.startswith("arn:") else f"arn:aws:events:{region}:{account}:event-bus/{name}"
        buses.setdefault(arn, []).append(entry)
    return [
        Request(
            "events:PutEvents",
            arn,
            {"events:source": [e.get("Source", "") for e in entries], "events:detail-type": [e.get("DetailType", "") for e in entries]},
        )
        for arn, entries in buses.items()
    ]


_MAPPERS = {
    "dynamodb": _dynamodb,
    "s3": _s3,
    "sns": _sns,
    "states": _states,
    "lambda": _lambda,
    "secretsmanager": _secretsmanager,
    "kms": _kms,
    "bedrock": _bedrock,
    "sqs": _sqs,
    "events": _events,
}
