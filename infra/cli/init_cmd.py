"""``longstep init DIR``: write a new project that uses Longstep as a library.

The project holds its own agents, scenarios and tests, ``cdk.json`` and ``app.py``, and the kit
as a wheel in ``vendor/`` (Longstep is not on a package index): its README's two commands set it
up and run it, with no path back to the checkout that made it.
"""

from __future__ import annotations

import argparse
import sys
import re
import shutil
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "project"
LOCK = Path(__file__).resolve().parent.parent / "requirements.lock"
PROJECT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,63}$")
# Template files are stored under names that tools in the kit's own repo leave alone.
_RENAMES = {"gitignore": ".gitignore", "Makefile.in": "Makefile"}


class InitError(ValueError):
    """The project cannot be written (the message says why, in one line)."""


def stack_name_for(directory: Path) -> str:
    """A CloudFormation stack name from the directory name (letters, digits and dashes)."""
    words = re.findall(r"[A-Za-z0-9]+", directory.name) or ["Agents"]
    name = "".join(w[:1].upper() + w[1:] for w in words)
    return name if name[0].isalpha() else f"Longstep{name}"


def write_project(directory: Path, stack_name: str | None = None, force: bool = False) -> list[Path]:
    """Write the project into ``directory`` (created; must be empty unless ``force``).

    Returns:
        The files written, relative to ``directory``.

    Raises:
        InitError: the directory is not empty, or the stack name is invalid.
    """
    stack = stack_name or stack_name_for(directory)
    if not PROJECT_NAME.match(stack):
        raise InitError(f"--stack-name: {stack!r} must start with a letter and hold only letters, digits and dashes (max 64)")
    if directory.exists() and any(directory.iterdir()) and not force:
        raise InitError(f"{directory}: not empty (use --force to write into it anyway)")
    written: list[Path] = []
    for source in sorted(TEMPLATE.rglob("*")):
        if source.is_dir() or "__pycache__" in source.parts or source.suffix == ".pyc":
            continue
        relative = source.relative_to(TEMPLATE)
        relative = relative.with_name(_RENAMES.get(relative.name, relative.name))
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text().replace("{{stack_name}}", stack))
        written.append(relative)
    written += [vendor_wheel(directory).relative_to(directory), Path("vendor") / LOCK.name]
    return written


def vendor_wheel(directory: Path) -> Path:
    """Replace the Longstep wheel in ``directory/vendor`` with one of the running Longstep.

    Raises:
        InitError: ``directory`` is not a Longstep project.
    """
    from longstep_kit.wheel import build_wheel

    if not (directory / "cdk.json").is_file():
        raise InitError(f"{directory}: no cdk.json here: not a Longstep project")
    vendor = directory / "vendor"
    for old in vendor.glob("longstep-*.whl"):
        old.unlink()
    wheel = build_wheel(vendor)
    # The versions the kit was tested with: the project installs exactly these (uv takes them from
    # the machine's cache when the kit was installed here: no download).
    shutil.copy2(LOCK, vendor / LOCK.name)
    return wheel


def cmd_vendor(args: argparse.Namespace) -> int:
    try:
        wheel = vendor_wheel(Path(args.directory))
    except InitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {wheel}; run `make setup` in {args.directory} to install it")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    try:
        files = write_project(directory, args.stack_name, args.force)
    except InitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {len(files)} files into {directory}/:")
    for path in files:
        print(f"  {path}")
    print(
        f"\nnext:\n  cd {directory}\n  make demo   # installs (.venv from vendor/) and runs the example agent locally\n  make test   # runs the project's tests"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="write a new project that uses Longstep as a library",
        description="Write a new Longstep project: cdk.json, app.py, an example agent, a scenario, tests, and the kit "
        "as a wheel in vendor/. Example: longstep init my-agents",
    )
    p.add_argument("directory", help="where to write the project (created; must be empty), e.g. my-agents")
    p.add_argument("--stack-name", help="CloudFormation stack name (default: from the directory name)")
    p.add_argument("--force", action="store_true", help="write into a directory that is not empty")
    p.set_defaults(func=cmd_init)
    v = sub.add_parser(
        "vendor",
        help="put this Longstep's wheel into a project (upgrade)",
        description="Replace the Longstep wheel in DIR/vendor/ with one of the running Longstep. Example: longstep vendor ../my-agents",
    )
    v.add_argument("directory", help="the project to upgrade, e.g. ../my-agents")
    v.set_defaults(func=cmd_vendor)
