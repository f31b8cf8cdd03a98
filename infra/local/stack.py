"""Deploy the synthesized template into moto and keep the handles a local run needs."""

from __future__ import annotations

import contextlib
import json
import time
import logging
import os
import re
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from longstep_kit.bundling import zip_asset
from longstep_kit.local import moto_patches, ttl
from longstep_kit.local.atomicity import dynamodb_lock, make_dynamodb_atomic
from longstep_kit.local.clock import VirtualClock
from longstep_kit.local.dispatch import Dispatcher
from longstep_kit.local.fidelity import Enforcement, warn_not_enforced
from longstep_kit.local.synth import Assembly, synthesize
from longstep_kit.local import variables as workflow_variables

REGION = "us-east-1"
ACCOUNT = "123456789012"
BOOTSTRAP_QUALIFIER = "hnb659fds"
_clients_lock = threading.Lock()
_SKIPPED = re.compile(r"Tried to parse (\S+) but it's not supported")
MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


class LocalDeployError(RuntimeError):
    """The template could not be deployed into moto."""


@dataclass
class LocalStack:
    """A Longstep stack running on moto in this process.

    Use as a context manager. ``outputs`` holds the stack outputs (table names, bucket, state
    machine ARN) and ``dispatcher`` every Lambda invocation. ``clock`` is the virtual time the
    engine and the handlers share: it skips ahead when nothing can happen (tests move it with
    ``clock.advance`` or keep it still with ``clock.held()``).

    Args:
        context: CDK context overrides (``{"longstep": {...}}``).
        enforce: refuse what AWS refuses (IAM, limits, ASL strictness; docs/local-fidelity.md).
            Off only on request, with a warning.
        enforcement_announced: the caller has told its user that enforcement is off (the CLI
            prints one line), so the stack does not warn a second time.
        hot_reload: before each invocation, pick up edited agent code (``local/reload.py``); a
            served stack turns it on, a scripted run (its transcript fixed) leaves it off.
    """

    context: dict[str, Any] | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    dispatcher: Dispatcher = field(default_factory=Dispatcher)
    clock: VirtualClock = field(default_factory=VirtualClock)
    ttl_attributes: dict[str, str] = field(default_factory=dict)
    assembly: Assembly | None = None
    skipped_resources: list[str] = field(default_factory=list)
    # The template's secrets (local/secrets.py: moto's CloudFormation creates none): logical id -> ARN;
    # and the template as deployed (their ARNs in place of their references).
    secrets: dict[str, str] = field(default_factory=dict)
    deployed_template: dict[str, Any] = field(default_factory=dict)
    enforce: bool = True
    enforcement_announced: bool = False
    enforcement: Enforcement = field(default_factory=Enforcement)
    hot_reload: bool = False
    # Called with a line per phase of the start (synth, deploy, enforcement) and its time; None: quiet.
    progress: Any = None
    # Called (no arguments, on the engine's thread) whenever an execution ends: drivers wait on it.
    execution_ends: list[Callable[[], None]] = field(default_factory=list)
    _mock: Any = None
    _saved_env: dict[str, str | None] = field(default_factory=dict)
    _clients: dict[str, Any] = field(default_factory=dict)

    def __enter__(self) -> "LocalStack":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def client(self, service: str) -> Any:
        """A boto3 client on this stack's moto account (cached: creating clients is slow)."""
        import boto3

        with _clients_lock:
            if service not in self._clients:
                self._clients[service] = boto3.client(service, region_name=REGION)
            return self._clients[service]

    def _execution_ended(self) -> None:
        for listener in list(self.execution_ends):
            listener()

    def start(self) -> None:
        """Start moto, route Lambda in-process and deploy the stack."""
        from moto import mock_aws

        from longstep import clients, clock

        for name, value in {"AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}.items():
            self._saved_env[name] = os.environ.get(name)
            os.environ[name] = value
        began = time.perf_counter()
        self.assembly = synthesize(self.context, progress=self._say)
        self._say(f"the CDK app's template ready ({time.perf_counter() - began:.1f} s; synthesized again only when the agents' declarations change)")
        make_dynamodb_atomic()
        # First: the patches below import moto's engine, whose import reads botocore's EC2 model
        # three times over (moto's Regions list) unless sessions share what they loaded.
        moto_patches.sessions_share_loaded_models()
        moto_patches.dynamodb_query_reads_one_partition(dynamodb_lock())  # a Query costs its partition, not the table
        moto_patches.serializer_remembers_aliases()
        moto_patches.serializer_skips_absent_members()
        moto_patches.engine_reuses_clients()
        moto_patches.definitions_parse_once()  # each definition parsed once, not once per execution
        moto_patches.json_paths_parse_once()  # each JSONPath parsed once, not on every evaluation
        moto_patches.templates_parse_as_json()
        moto_patches.response_actions_listed_once()  # each response class's actions listed once, not per request
        moto_patches.user_agent_parts_cleaned_once()
        moto_patches.requests_routed_once()  # each URL's handler found once, not per request
        moto_patches.expression_processors_map_once()
        moto_patches.expression_trees_copied_directly()
        moto_patches.condition_expressions_lex_once()
        self._mock = mock_aws(config=MOTO_CONFIG)
        self._mock.start()
        clients.reset()
        self.dispatcher.install()
        moto_patches.virtual_clock(self.clock)
        moto_patches.transactions_keep_request_tokens(self.clock.time)  # an SDK retry of a transaction is idempotent, as in AWS
        moto_patches.engine_timestamps(self.clock)  # executions and histories dated on the same clock
        moto_patches.stop_execution_aborts(self.clock)
        moto_patches.execution_end_notifies(self._execution_ended)
        moto_patches.send_task_failure_keeps_cause()
        moto_patches.lambda_version_refs()
        moto_patches.event_bus_refs()
        moto_patches.event_rules_invoke_lambda()
        moto_patches.execution_status_events()
        moto_patches.state_machine_versions()
        clock.set_source(self.clock.time)  # the handlers read the engine's time
        self.clock.on_advance(lambda now: ttl.delete_expired(ACCOUNT, REGION, now))
        self.clock.start()
        workflow_variables.variables_by_reference()  # undone by moto_patches.undo_all
        try:
            began = time.perf_counter()
            self._deploy(self.assembly)
            self._say(f"deployed {len(self.assembly.template.get('Resources', {}))} resources into moto ({time.perf_counter() - began:.1f} s)")
            if self.hot_reload:
                from longstep_kit.local.reload import CodeReloader

                self.dispatcher.reload = CodeReloader(self, self.progress or (lambda line: None))
            if self.enforce:
                began = time.perf_counter()
                self.enforcement.install(self.deployed_template, self.assembly.stack_name, ACCOUNT, REGION)
                self._say(f"refusing what AWS refuses: IAM, limits, ASL ({time.perf_counter() - began:.1f} s)")
                self.dispatcher.enforce_limits = True
                self._clients.clear()  # clients made during the deploy predate the hook
            elif not self.enforcement_announced:
                warn_not_enforced()
        except Exception:
            self.stop()
            raise

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(f"  {line}")

    def stop(self) -> None:
        """Stop moto and restore what :meth:`start` changed."""
        from longstep import clients, clock

        self.enforcement.uninstall()
        self.clock.stop()
        clock.set_source(None)
        moto_patches.undo_all()
        self.dispatcher.reload = None
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        clients.reset()
        self._clients.clear()
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    # -- deployment -------------------------------------------------------------------------

    def _deploy(self, assembly: Assembly) -> None:
        # moto names resources with random suffixes, as AWS does; seeded by the stack's name, one
        # template gets the same names in every fresh moto, so its definitions are the same text and
        # each is parsed once per process (moto_patches.definitions_parse_once), not per deploy (~2 s).
        from moto.moto_api._internal import mock_random

        drawn = mock_random.getstate()
        mock_random.seed(assembly.stack_name)
        try:
            self._create(assembly)
        finally:
            mock_random.setstate(drawn)
        self._register_state_machines()
        self._publish_versions(assembly.template)

    def _create(self, assembly: Assembly) -> None:
        bucket = f"cdk-{BOOTSTRAP_QUALIFIER}-assets-{ACCOUNT}-{REGION}"
        s3 = self.client("s3")
        s3.create_bucket(Bucket=bucket)
        zips = assembly.project / ".longstep" / "asset-zips"
        for asset_hash, directory in assembly.assets.items():
            s3.put_object(Bucket=bucket, Key=f"{asset_hash}.zip", Body=zip_asset(directory, asset_hash, zips).read_bytes())
        # Each function runs the code of its own asset, as in Lambda (the handlers come from the layer).
        self.dispatcher.code_dirs = {f"{asset_hash}.zip": directory for asset_hash, directory in assembly.assets.items()}
        self.client("ssm").put_parameter(Name=f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version", Value="21", Type="String")
        cfn = self.client("cloudformation")
        # moto's CloudFormation creates no secrets: made here first (local/secrets.py).
        from longstep_kit.local.secrets import provision_secrets

        self.deployed_template, self.secrets = provision_secrets(self.client("secretsmanager"), assembly.template)
        with _moto_cloudformation_quiet() as caught:  # the skipped types are reported below instead, once
            cfn.create_stack(
                StackName=assembly.stack_name,
                TemplateBody=json.dumps(self.deployed_template),
                Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
            )
        # moto skips a few resource types it cannot model (S3 bucket policies, for one); keep the
        # list so a reader of the local stack knows what is not emulated.
        # (State machine versions and aliases are published by :meth:`_publish_versions` instead.)
        emulated = {"AWS::StepFunctions::StateMachineVersion", "AWS::StepFunctions::StateMachineAlias"}
        self.skipped_resources = sorted({m.group(1) for w in caught if (m := _SKIPPED.search(str(w.message)))} - emulated)
        stack = cfn.describe_stacks(StackName=assembly.stack_name)["Stacks"][0]
        if stack["StackStatus"] != "CREATE_COMPLETE":
            raise LocalDeployError(f"stack {assembly.stack_name} ended {stack['StackStatus']}: {stack.get('StackStatusReason')}")
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        self.ttl_attributes = ttl.apply_template_ttl(cfn, self.client("dynamodb"), assembly.stack_name, assembly.template)

    def _register_state_machines(self) -> None:
        """CloudFormation puts state machines in moto's non-executing backend: register them again."""
        from moto.stepfunctions.models import stepfunctions_backends

        sfn = self.client("stepfunctions")
        for machine in stepfunctions_backends[ACCOUNT][REGION].state_machines:
            sfn.create_state_machine(
                name=machine.name,
                definition=machine.definition,
                roleArn=machine.roleArn,
                type=getattr(machine, "type", "STANDARD") or "STANDARD",
            )

    def redeploy(self, context: dict[str, Any] | None) -> None:
        """Deploy a changed project (``context``: CDK context overrides) over the running stack.

        What a ``cdk deploy`` of new code or configuration does to the loop (moto's CloudFormation
        updates too little of a stack for it): each changed function gets its new code and
        environment and publishes a new version (the old ones stay: their removal policy is
        RETAIN), the state machine calls the new versions, a state machine version is published
        and the alias points at it. Executions already running keep the version they started on.
        Emulated for changes of the functions' code and configuration; a change of the template's
        shape (new agents, new resources) needs a fresh stack.
        """
        from moto.awslambda.models import LambdaVersion
        from moto.cloudformation.models import cloudformation_backends

        from longstep_kit.local.fidelity import deployed_policies
        from longstep_kit.local.secrets import ROTATION, SECRET, _replace

        assembly = synthesize(context)
        bucket = f"cdk-{BOOTSTRAP_QUALIFIER}-assets-{ACCOUNT}-{REGION}"
        zips = assembly.project / ".longstep" / "asset-zips"
        for asset_hash, directory in assembly.assets.items():
            self.client("s3").put_object(Bucket=bucket, Key=f"{asset_hash}.zip", Body=zip_asset(directory, asset_hash, zips).read_bytes())
            self.dispatcher.code_dirs[f"{asset_hash}.zip"] = directory
        # The secrets exist already: the template as deployed names their ARNs (local/secrets.py).
        kept = {lid: r for lid, r in assembly.template["Resources"].items() if r["Type"] not in (SECRET, ROTATION)}
        template = _replace({**assembly.template, "Resources": kept}, self.secrets)
        (stack,) = [s for s in cloudformation_backends[ACCOUNT][REGION].stacks.values() if s.name == assembly.stack_name]
        lam, sfn = self.client("lambda"), self.client("stepfunctions")
        replaced: dict[str, str] = {}  # the old version ARN -> the new one
        resources = template["Resources"]
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::Lambda::Version":
                continue
            function_id = resource["Properties"]["FunctionName"]["Ref"]
            name = stack.resource_map[function_id].physical_resource_id
            before = lam.get_function_configuration(FunctionName=name)
            props = resources[function_id]["Properties"]
            lam.update_function_code(FunctionName=name, S3Bucket=bucket, S3Key=props["Code"]["S3Key"])
            # Literal values from the new template; references resolve to the same resources as before.
            variables = dict(before.get("Environment", {}).get("Variables", {}))
            variables.update({k: v for k, v in props.get("Environment", {}).get("Variables", {}).items() if isinstance(v, str)})
            lam.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
            published = lam.publish_version(FunctionName=name)["FunctionArn"]
            versions = lam.list_versions_by_function(FunctionName=name)["Versions"]
            previous = [v["FunctionArn"] for v in versions if v["Version"] not in ("$LATEST", published.rpartition(":")[2])]
            for old in previous:
                replaced[old] = published
            version = LambdaVersion({"Version": published.rpartition(":")[2]})
            version.physical_resource_id = published
            stack.resource_map._parsed_resources[logical_id] = version  # the stack now holds it, as in AWS
        # The deployed definitions, calling the new versions where the functions changed.
        for summary in sfn.list_state_machines()["stateMachines"]:
            definition = sfn.describe_state_machine(stateMachineArn=summary["stateMachineArn"])["definition"]
            updated = definition
            for old, new in sorted(replaced.items(), key=lambda item: -len(item[0])):
                updated = updated.replace(f'"{old}"', f'"{new}"')
            if updated != definition:
                sfn.update_state_machine(stateMachineArn=summary["stateMachineArn"], definition=updated)
        self.assembly = assembly
        self.deployed_template = template
        self._publish_versions(template)
        if self.enforcement.policies is not None:
            self.enforcement.policies = deployed_policies(template, assembly.stack_name, ACCOUNT, REGION)

    def _publish_versions(self, template: dict[str, Any]) -> None:
        """Publish each state machine version the template declares and point its alias at it.

        moto's CloudFormation skips ``AWS::StepFunctions::StateMachineVersion`` and
        ``...::StateMachineAlias``; done here through the API instead, as CloudFormation would:
        a version of the current revision (the same one again when the definition is unchanged),
        the alias routing all traffic to it.
        """
        sfn = self.client("stepfunctions")
        assert self.assembly is not None
        physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in self.stack_resources()}
        resources = template.get("Resources", {})
        for logical_id, resource in resources.items():
            if resource["Type"] != "AWS::StepFunctions::StateMachineVersion":
                continue
            machine = physical[resource["Properties"]["StateMachineArn"]["Ref"]]
            version = sfn.publish_state_machine_version(stateMachineArn=machine, description=resource["Properties"].get("Description", ""))
            for alias in resources.values():
                routes = alias.get("Properties", {}).get("RoutingConfiguration", [])
                if alias["Type"] != "AWS::StepFunctions::StateMachineAlias" or routes[0]["StateMachineVersionArn"] != {
                    "Fn::GetAtt": [logical_id, "Arn"]
                }:
                    continue
                routing = [{"stateMachineVersionArn": version["stateMachineVersionArn"], "weight": 100}]
                existing = {a["stateMachineAliasArn"] for a in sfn.list_state_machine_aliases(stateMachineArn=machine)["stateMachineAliases"]}
                arn = f"{machine}:{alias['Properties']['Name']}"
                if arn in existing:
                    sfn.update_state_machine_alias(stateMachineAliasArn=arn, routingConfiguration=routing)
                else:
                    sfn.create_state_machine_alias(name=alias["Properties"]["Name"], routingConfiguration=routing)

    def stack_resources(self) -> list[dict[str, Any]]:
        """The deployed stack's resource summaries (ListStackResources, every page)."""
        assert self.assembly is not None
        # moto parses the types it skips again on every listing, warning each time: quieted here.
        with _moto_cloudformation_quiet():
            pages = self.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=self.assembly.stack_name)
            return [r for page in pages for r in page["StackResourceSummaries"]]

    def reset_data(self) -> None:
        """Empty every table of the stack (the agents' own too) and the artifacts bucket (a fresh world for the next run).

        The tables are emptied in moto's backend, under the lock its DynamoDB operations take:
        deleting item by item through the API cost a crash campaign a tenth of its time, and what
        is under test is the next run, not this wipe.
        """
        from moto.dynamodb.models import dynamodb_backends

        s3 = self.client("s3")
        backend = dynamodb_backends[ACCOUNT][REGION]
        tables = [r["PhysicalResourceId"] for r in self.stack_resources() if r["ResourceType"] == "AWS::DynamoDB::Table"]
        with dynamodb_lock():
            for name in tables:
                backend.get_table(name).items.clear()
        bucket = self.outputs["ArtifactBucketName"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                s3.delete_object(Bucket=bucket, Key=obj["Key"])

    @property
    def state_machine_arn(self) -> str:
        return self.outputs["StateMachineArn"]

    @property
    def alias_arn(self) -> str:
        """The alias runs start on: this deploy's state machine version (``longstep.pinning``)."""
        from longstep.pinning import alias_arn

        return alias_arn(self.state_machine_arn)


@contextlib.contextmanager
def _moto_cloudformation_quiet() -> Iterator[list[warnings.WarningMessage]]:
    """Collect, rather than print, what moto's CloudFormation parser says of the types it skips
    (a warning and a log line each); the caught warnings are yielded."""
    moto_logger = logging.getLogger("moto")
    level = moto_logger.level
    moto_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield caught
    finally:
        moto_logger.setLevel(level)
