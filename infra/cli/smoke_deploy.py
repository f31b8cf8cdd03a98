"""``longstep smoke``'s throwaway stack on an account: synthesized here, deployed with the CDK CLI,
destroyed on the way out (Ctrl-C and failures too), with what a destroy leaves behind cleaned up.

The copy is the project's stack under its own name (``LongstepSmoke<hex>``), with
``destroy_on_delete`` (its tables and bucket go with it), the caller as the one signal principal
(so that its ``PutEvents`` are the only ones the bus takes), and the scenarios' extra agents.
Runs name the scripted model: nothing calls Bedrock.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from longstep_kit.cli.errors import EXIT_AWS, CliError

DEPLOY_TIMEOUT_SECONDS = 3600


class Throwaway:
    """One throwaway stack.

    Args:
        aws: the command's clients (its profile and Region are the CDK's too).
        agents: agents beyond the project's (name -> module:callable).
        say: prints one progress line.
        keep: leave it deployed on exit.
    """

    def __init__(self, aws: Any, agents: dict[str, str], say: Any, keep: bool = False) -> None:
        self.aws, self.agents, self.say, self.keep = aws, agents, say, keep
        self.stack_name = f"LongstepSmoke{secrets.token_hex(3)}"
        self.outdir = Path(tempfile.mkdtemp(prefix="longstep-smoke-"))
        self.log_groups: list[str] = []
        self.bucket: str | None = None
        self.started = False

    def context(self) -> dict[str, Any]:
        """The copy's ``longstep`` context: the project's, renamed, destroyed with the stack, signalled by the caller."""
        from longstep_kit.project import agent_catalog, cdk_context, find_project

        base = dict(cdk_context(find_project()).get("longstep", {}))
        base.update(
            stack_name=self.stack_name,
            destroy_on_delete=True,
            signal_principals=[self.caller_principal()],
            agents={**agent_catalog().references, **self.agents},
        )
        return {"longstep": base}

    def caller_principal(self) -> str:
        """The caller as a bus policy names it: an assumed role's session is its role's ARN.

        https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_principal.html#principal-role-session
        """
        arn = str(self.aws.client("sts").get_caller_identity()["Arn"])
        if ":assumed-role/" not in arn:
            return arn
        role = arn.split(":assumed-role/", 1)[1].split("/", 1)[0]
        try:
            return str(self.aws.client("iam").get_role(RoleName=role)["Role"]["Arn"])  # with its path
        except Exception:  # noqa: BLE001 - no iam:GetRole: the path-less ARN (right for roles without a path)
            account = arn.split(":")[4]
            return f"arn:aws:iam::{account}:role/{role}"

    def deploy(self) -> dict[str, str]:
        """Synthesize and deploy the copy; its outputs.

        Raises:
            CliError: the synth or the deploy failed (the deploy is destroyed on the way out).
        """
        from longstep_kit.local.synth import synthesize

        started = time.monotonic()
        self.say(f"smoke: synthesizing {self.stack_name}...")
        assembly = synthesize(self.context(), outdir=self.outdir)
        self.say(f"smoke: synthesized ({time.monotonic() - started:.0f} s); deploying {assembly.stack_name} with the CDK (a few minutes)...")
        self.started = True
        self._cdk("deploy", "--require-approval", "never")
        outputs = self.aws.stack_outputs(self.stack_name)
        self.bucket = outputs.get("ArtifactBucketName")
        self.say(f"smoke: deployed ({time.monotonic() - started:.0f} s)")
        return outputs

    def tear_down(self) -> None:
        """Destroy the copy and what a destroy leaves: the bucket's objects (it must be empty to go) and the log groups."""
        if not self.started:
            shutil.rmtree(self.outdir, ignore_errors=True)
            return
        if self.keep:
            self.say(f"smoke: kept {self.stack_name} (--keep): npx cdk destroy --app {self.outdir} --force {self.stack_name}")
            return
        started = time.monotonic()
        self.say(f"smoke: tearing down {self.stack_name}...")
        self.log_groups = self._log_groups()
        if self.bucket:
            self._empty(self.bucket)
        self._cdk("destroy", "--force")
        logs = self.aws.client("logs")
        for name in self.log_groups:
            try:
                logs.delete_log_group(logGroupName=name)
            except logs.exceptions.ResourceNotFoundException:
                pass
        shutil.rmtree(self.outdir, ignore_errors=True)
        self.say(f"smoke: torn down ({time.monotonic() - started:.0f} s); left behind: the CDK bootstrap stack's staged assets")

    def _log_groups(self) -> list[str]:
        """The copy's log groups: the functions' (``/aws/lambda/NAME``) and the ones the template declares."""
        cfn = self.aws.client("cloudformation")
        try:
            resources = [
                r for page in cfn.get_paginator("list_stack_resources").paginate(StackName=self.stack_name) for r in page["StackResourceSummaries"]
            ]
        except Exception:  # noqa: BLE001 - the deploy never created the stack
            return []
        names = [f"/aws/lambda/{r['PhysicalResourceId']}" for r in resources if r["ResourceType"] == "AWS::Lambda::Function"]
        return names + [r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::Logs::LogGroup"]

    def _empty(self, bucket: str) -> None:
        s3 = self.aws.client("s3")
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            doomed = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
            if doomed:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})

    def _cdk(self, verb: str, *flags: str) -> None:
        npx = shutil.which("npx")
        if npx is None:
            raise CliError("npx: not found; the deploy needs Node.js and the CDK CLI (README, Quick start)", EXIT_AWS)
        command = [npx, "cdk", verb, "--app", str(self.outdir), *flags, self.stack_name]
        if self.aws.profile:
            command += ["--profile", self.aws.profile]
        env = dict(os.environ)  # a child's environment: the CDK reads the Region from it
        if self.aws.region:
            env["AWS_REGION"] = env["AWS_DEFAULT_REGION"] = self.aws.region
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEPLOY_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise CliError(f"cdk {verb} {self.stack_name}: still running after {DEPLOY_TIMEOUT_SECONDS} s", EXIT_AWS) from None
        log = self.outdir.parent / f"{self.stack_name}-{verb}.log"
        log.write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            last = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()][-1:] or ["(no output)"]
            raise CliError(f"cdk {verb} {self.stack_name} failed: {last[0][:300]}", EXIT_AWS, f"its output: {log}")
