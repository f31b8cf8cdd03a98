"""The engine's own messages (moto's Step Functions parser, werkzeug's request log, botocore) go to
a log file the user can open, never to the terminal: what the terminal shows of a failure is the
run's own lines (``cli/failure_lines.py``) and this file's path."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

LOG_DIR = Path(".longstep") / "logs"
KEEP = 20  # the newest logs kept; older ones are removed when a new one starts


class EngineLog:
    """A log file under ``.longstep/logs/`` of the project (or the working directory) receiving every
    Python log record of warning level and above, and werkzeug's and moto's at info.

    Args:
        command: names the file (``local-run``, ``local-serve``...).
        base: the directory holding ``.longstep/`` (default: the project's, else the working directory).
    """

    def __init__(self, command: str, base: Path | None = None) -> None:
        root = base or _project_or_cwd()
        self.directory = root / LOG_DIR
        self.path = self.directory / f"{command}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
        self._handler: logging.Handler | None = None

    def start(self) -> "EngineLog":
        self.directory.mkdir(parents=True, exist_ok=True)
        _prune(self.directory)
        handler = logging.FileHandler(self.path, delay=True, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)  # with a root handler, no record reaches stderr
        for name in ("werkzeug", "moto"):
            logging.getLogger(name).setLevel(logging.INFO)
        self._handler = handler
        return self

    def stop(self) -> None:
        if self._handler is not None:
            logging.getLogger().removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def __enter__(self) -> "EngineLog":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def written(self) -> bool:
        """Whether anything was logged (the file exists only then)."""
        return self.path.exists() and self.path.stat().st_size > 0

    def shown(self) -> str:
        """The path as the user can open it (relative to the working directory when under it)."""
        try:
            return str(self.path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(self.path)


def _project_or_cwd() -> Path:
    from longstep_kit.project import ProjectNotFoundError, find_project

    try:
        return find_project()
    except ProjectNotFoundError:
        return Path.cwd()


def _prune(directory: Path) -> None:
    logs = sorted(directory.glob("*.log"), key=lambda p: p.stat().st_mtime)
    for old in logs[:-KEEP]:
        old.unlink(missing_ok=True)
