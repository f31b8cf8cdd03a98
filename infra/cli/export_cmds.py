"""``longstep export``: a run's transcript and artifacts as one JSON file, replayable locally."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def cmd_export(args: argparse.Namespace) -> int:
    from longstep_kit.cli.aws_cmds import stack_output
    from longstep.artifacts import ArtifactStore
    from longstep_kit.ops.export import export_run
    from longstep.store import CheckpointStore

    store = CheckpointStore(stack_output(args, "CheckpointTableName"), args.aws.client("dynamodb"))
    artifacts = ArtifactStore(stack_output(args, "ArtifactBucketName"), args.aws.client("s3"))
    exported = export_run(store, artifacts, args.run_id)
    text = json.dumps(exported, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        recorded = exported["recorded"]
        print(
            f"wrote {args.out}: {len(exported['turns'])} turns, {len(recorded['artifacts'])} artifacts, transcript sha256 {recorded['transcript_sha256']}"
        )
    else:
        sys.stdout.write(text)
    return 0


def register(sub: Any) -> None:
    export = sub.add_parser("export", help="write a run's transcript and artifacts as one JSON file (a replayable scenario)")
    export.add_argument("run_id")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.add_argument("--stack", default="Longstep", help="deployed stack name (default Longstep)")
    export.set_defaults(func=cmd_export)
