"""The IAM evaluator on its own: AWS's evaluation logic for one account (no stack needed)."""

from __future__ import annotations

import pytest

from longstep_kit.local import iam

ROLE = "arn:aws:iam::123456789012:role/fn"
BUCKET = "arn:aws:s3:::b"


def _policies(identity, resource_statements=(), key=False):
    policies = iam.Policies(roles={ROLE: list(identity)})
    if resource_statements:
        policies.resource_policies.append(iam.ResourcePolicy([BUCKET], list(resource_statements), is_key_policy=key))
    return policies


def test_an_explicit_deny_in_a_bucket_policy_wins_over_an_allow():
    allow = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{BUCKET}/*"}
    deny_insecure = {
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
        "Action": "s3:*",
        "Resource": [BUCKET, f"{BUCKET}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }
    policies = _policies([allow], [deny_insecure])
    assert policies.decide(ROLE, "s3:GetObject", f"{BUCKET}/k", {}).allowed  # boto3 uses HTTPS
    assert not policies.decide(ROLE, "s3:GetObject", f"{BUCKET}/k", {"aws:SecureTransport": "false"}).allowed


def test_a_resource_policy_naming_the_role_allows_without_an_identity_policy():
    grant = {"Effect": "Allow", "Principal": {"AWS": ROLE}, "Action": "s3:GetObject", "Resource": f"{BUCKET}/*"}
    assert _policies([], [grant]).decide(ROLE, "s3:GetObject", f"{BUCKET}/k", {}).allowed
    assert not _policies([]).decide(ROLE, "s3:GetObject", f"{BUCKET}/k", {}).allowed


def test_a_key_policy_must_delegate_to_the_account_for_iam_to_count():
    use = {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"}
    delegate = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "kms:*", "Resource": "*"}
    other = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:role/other"}, "Action": "kms:*", "Resource": "*"}
    assert _policies([use], [delegate], key=True).decide(ROLE, "kms:Decrypt", BUCKET, {}).allowed
    assert not _policies([use], [other], key=True).decide(ROLE, "kms:Decrypt", BUCKET, {}).allowed


def test_conditions_wildcards_and_missing_keys():
    listing = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET, "Condition": {"StringLike": {"s3:prefix": ["artifacts/*"]}}}
    assert iam.allowed([listing], "s3:ListBucket", BUCKET, {"s3:prefix": "artifacts/sha256/x"})
    assert not iam.allowed([listing], "s3:ListBucket", BUCKET, {"s3:prefix": "scripts/x"})
    assert not iam.allowed([listing], "s3:ListBucket", BUCKET, {})  # a missing key fails the condition
    assert iam.allowed(
        [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "arn:aws:dynamodb:*:*:table/t"}],
        "dynamodb:GetItem",
        "arn:aws:dynamodb:us-east-1:1:table/t",
    )
    assert not iam.allowed(
        [{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "arn:aws:dynamodb:*:*:table/t"}],
        "dynamodb:Query",
        "arn:aws:dynamodb:us-east-1:1:table/t/index/i",
    )


def test_an_unknown_condition_operator_is_refused_not_guessed():
    odd = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2020-01-01"}}}
    with pytest.raises(iam.UnsupportedCondition):
        iam.allowed([odd], "s3:GetObject", f"{BUCKET}/k", {})


def test_a_missing_key_satisfies_a_negated_operator_as_in_aws():
    # "If the policy condition requires that the key is not matched, such as StringNotLike or
    # ArnNotLike, and the right key is not present, the condition is true" (IAM condition operators).
    deny_direct = {
        "Effect": "Deny",
        "Action": "bedrock:InvokeModel",
        "Resource": "arn:aws:bedrock:*::foundation-model/*",
        "Condition": {"ArnNotLike": {"bedrock:InferenceProfileArn": "arn:aws:bedrock:*:*:inference-profile/*"}},
    }
    allow = {"Effect": "Allow", "Action": "bedrock:InvokeModel", "Resource": "*"}
    model = "arn:aws:bedrock:us-west-1::foundation-model/m"
    assert not iam.allowed([allow, deny_direct], "bedrock:InvokeModel", model, {})  # a direct call: denied
    profile = {"bedrock:InferenceProfileArn": "arn:aws:bedrock:us-east-1:1:inference-profile/us.m"}
    assert iam.allowed([allow, deny_direct], "bedrock:InvokeModel", model, profile)
    with_if_exists = {**deny_direct, "Condition": {"ArnNotLikeIfExists": deny_direct["Condition"]["ArnNotLike"]}}
    assert not iam.allowed([allow, with_if_exists], "bedrock:InvokeModel", model, {})
    # A negated operator with several values is a NOR.
    nor = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET, "Condition": {"StringNotEquals": {"s3:prefix": ["a", "b"]}}}
    assert iam.allowed([nor], "s3:ListBucket", BUCKET, {"s3:prefix": "c"})
    assert not iam.allowed([nor], "s3:ListBucket", BUCKET, {"s3:prefix": "b"})


def test_arn_operators_match_each_part_of_the_arn_on_its_own():
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.m"

    def through(pattern, operator="ArnLike"):
        statement = {
            "Effect": "Allow",
            "Action": "bedrock:InvokeModel",
            "Resource": "*",
            "Condition": {operator: {"bedrock:InferenceProfileArn": pattern}},
        }
        return iam.allowed(
            [statement], "bedrock:InvokeModel", "arn:aws:bedrock:us-west-1::foundation-model/m", {"bedrock:InferenceProfileArn": profile}
        )

    assert through(profile) and through(profile, "ArnEquals")
    assert through("arn:aws:bedrock:*:*:inference-profile/*") and through("arn:aws:bedrock:*:*:inference-profile/*", "ArnEquals")
    assert not through("arn:aws:bedrock:us-east-2:123456789012:inference-profile/us.m")
    assert not through("arn:aws:bedrock:*")  # a * does not run across the ARN's colons
    assert not through("arn:aws:bedrock:*:*:inference-profile/eu.*")


def test_condition_key_names_are_case_insensitive():
    statement = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET, "Condition": {"StringLike": {"S3:Prefix": "artifacts/*"}}}
    assert iam.allowed([statement], "s3:ListBucket", BUCKET, {"s3:prefix": "artifacts/x"})
    assert not iam.allowed([statement], "s3:ListBucket", BUCKET, {"s3:prefix": "Artifacts/x"})  # values are case-sensitive


def test_set_operators_on_a_multivalued_key_as_aws_documents_them():
    # https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html
    every = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["lead", "lead#user#*"]}}
    assert iam.condition_holds(every, {"dynamodb:LeadingKeys": ["lead", "lead#user#alice"]})
    assert not iam.condition_holds(every, {"dynamodb:LeadingKeys": ["lead", "research"]})  # every value must match
    assert iam.condition_holds(every, {})  # ForAllValues holds with no value at all...
    assert iam.condition_holds(every, {"dynamodb:LeadingKeys": []})
    required = {**every, "Null": {"dynamodb:LeadingKeys": "false"}}
    assert not iam.condition_holds(required, {})  # ...so a policy requires one with Null: false
    assert iam.condition_holds(required, {"dynamodb:LeadingKeys": ["lead"]})
    some = {"ForAnyValue:StringEquals": {"events:source": ["longstep.signal"]}}
    assert iam.condition_holds(some, {"events:source": ["com.example", "longstep.signal"]})
    assert not iam.condition_holds(some, {"events:source": ["com.example"]})
    assert not iam.condition_holds(some, {})  # ForAnyValue needs a value
    none_of = {"ForAllValues:StringNotEquals": {"events:source": ["a", "b"]}}
    assert iam.condition_holds(none_of, {"events:source": ["c", "d"]})
    assert not iam.condition_holds(none_of, {"events:source": ["c", "a"]})


def test_a_multivalued_key_under_a_plain_operator_is_refused_not_guessed():
    with pytest.raises(iam.UnsupportedCondition):
        iam.condition_holds({"StringEquals": {"dynamodb:LeadingKeys": "lead"}}, {"dynamodb:LeadingKeys": ["lead"]})
    with pytest.raises(iam.UnsupportedCondition):
        iam.condition_holds({"ForSomeValues:StringEquals": {"k": "v"}}, {"k": ["v"]})


class _Keys:
    """The table schemas a DynamoDB request's leading keys are read with (moto's, in the stack)."""

    def partition_key(self, table, index=None):
        return {"memory": "namespace", "checkpoints": "pk"}.get(table)


@pytest.mark.parametrize(
    ("operation", "params", "keys"),
    [
        ("PutItem", {"TableName": "memory", "Item": {"namespace": {"S": "lead"}, "key": {"S": "k"}}}, ["lead"]),
        ("GetItem", {"TableName": "checkpoints", "Key": {"pk": {"S": "run-1"}, "sk": {"S": "run"}}}, ["run-1"]),
        (
            "Query",
            {
                "TableName": "memory",
                "KeyConditionExpression": "#ns = :ns",
                "ExpressionAttributeNames": {"#ns": "namespace"},
                "ExpressionAttributeValues": {":ns": {"S": "lead#user#alice"}},
            },
            ["lead#user#alice"],
        ),
        (
            "Query",
            {
                "TableName": "checkpoints",
                "KeyConditionExpression": ":p = pk AND begins_with(sk, :s)",
                "ExpressionAttributeValues": {":p": {"S": "r"}, ":s": {"S": "step"}},
            },
            ["r"],
        ),
        ("Scan", {"TableName": "memory"}, []),  # no partition: ForAllValues would hold, Null: false refuses
    ],
)
def test_a_dynamodb_request_carries_the_partition_keys_it_touches(operation, params, keys):
    from longstep_kit.local.iam_actions import requests_for

    (request,) = requests_for("dynamodb", operation, params, "us-east-1", "123456789012", _Keys())
    assert request.context.get("dynamodb:LeadingKeys", []) == keys
