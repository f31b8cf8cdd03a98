"""Step Functions execution data under the stack's customer-managed key.

A state machine encrypts its definition and its executions' history (start inputs, task tokens
in scheduled parameters, results) with an AWS-owned key unless its ``EncryptionConfiguration``
names a customer-managed one
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_EncryptionConfiguration.html).
With ``customer_managed_key``, every state machine of the stack names the stack's key.

What the key must allow, from https://docs.aws.amazon.com/step-functions/latest/dg/encryption-at-rest.html:

- the execution role: ``kms:Decrypt`` and ``kms:GenerateDataKey`` for its own state machine's
  data (``kms:EncryptionContext:aws:states:stateMachineArn``), and, with CloudWatch Logs on,
  ``kms:GenerateDataKey`` for log delivery (``kms:EncryptionContext:SourceArn``, this account's
  logs);
- ``delivery.logs.amazonaws.com``: ``kms:Decrypt``, in the key policy;
- API callers: ``kms:Decrypt`` for ``DescribeExecution``, ``DescribeStateMachine`` and
  ``GetExecutionHistory`` (the loop functions that call them hold ``KEY_USE`` already); none for
  ``StartExecution``, ``SendTaskSuccess``, ``SendTaskFailure`` or ``StopExecution``.

The key's default policy delegates to the account, so the execution role's grant is an IAM
policy. CDK's ``CustomerManagedEncryptionConfiguration`` is not used: for a state machine without
a physical name (this kit names none) it writes the role's condition as
``arn:...:stateMachine:`` with an empty name, which no execution matches (aws-cdk-lib 2.275,
``aws-stepfunctions/lib/state-machine.js``). Here the condition names the state machine's own ARN,
in a policy of its own: in the role's default policy it would make a cycle (the state machine
waits for its role's default policy).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

CUSTOMER_MANAGED = "CUSTOMER_MANAGED_KMS_KEY"
# How long Step Functions reuses a data key before calling GenerateDataKey again (60 to 900 s);
# CDK's and the API's default.
DATA_KEY_REUSE_SECONDS = 300
STATE_MACHINE_CONTEXT = "kms:EncryptionContext:aws:states:stateMachineArn"


def encrypt_executions(scope: Construct, cid: str, state_machine: sfn.StateMachine, key: kms.IKey | None) -> None:
    """Encrypt ``state_machine``'s definition and execution data with ``key`` (None: nothing changes).

    Args:
        cid: the id of the execution role's key policy, in ``scope``.
    """
    if key is None:
        return
    cfn = state_machine.node.default_child
    assert isinstance(cfn, sfn.CfnStateMachine)
    cfn.encryption_configuration = sfn.CfnStateMachine.EncryptionConfigurationProperty(
        type=CUSTOMER_MANAGED, kms_key_id=key.key_arn, kms_data_key_reuse_period_seconds=DATA_KEY_REUSE_SECONDS
    )
    stack = Stack.of(scope)
    this_accounts_logs = stack.format_arn(service="logs", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME)
    iam.Policy(
        scope,
        cid,
        roles=[state_machine.role],
        statements=[
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[key.key_arn],
                conditions={"StringEquals": {STATE_MACHINE_CONTEXT: state_machine.state_machine_arn}},
            ),
            iam.PolicyStatement(
                actions=["kms:GenerateDataKey"],
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:EncryptionContext:SourceArn": this_accounts_logs}},
            ),
        ],
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="StepFunctionsLogDelivery",
            principals=[iam.ServicePrincipal("delivery.logs.amazonaws.com")],
            actions=["kms:Decrypt"],
            resources=["*"],
        )
    )
