"""``module:callable`` references: how configuration names user code (agents, workflows, model providers)."""

from __future__ import annotations

import importlib
import json
import re
import threading
from typing import Any, Callable, ClassVar, Generic, Mapping, TypeVar

# "package.module:attribute": what cdk.json's ``agents`` values and LONGSTEP_AGENTS hold.
REFERENCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")


def import_callable(reference: str, what: str, error: type[Exception]) -> Callable[..., Any]:
    """The callable ``reference`` names.

    Args:
        reference: ``module:callable``.
        what: how messages name it (``agent``, ``provider factory``).
        error: the exception class raised when it cannot be found.

    Raises:
        error: the module or the callable does not exist.
    """
    module_name, _, attr = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise error(f"{what} {reference!r}: module {exc.name!r} not found") from None
    found = getattr(module, attr, None)
    if not callable(found):
        raise error(f"{what} {reference!r}: {module_name} has no callable {attr!r}")
    return found


def parse_references(raw: str | None, variable: str) -> dict[str, str]:
    """The name -> ``module:callable`` object an environment variable holds (empty when unset).

    Raises:
        SettingsError: the value is not a JSON object of names to ``module:callable`` strings.
    """
    from longstep.settings import SettingsError  # settings is the runtime's; references stay import-light

    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SettingsError(f"environment variable {variable} is not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise SettingsError(f"environment variable {variable} must be a JSON object")
    for name, ref in value.items():
        if not isinstance(ref, str) or not REFERENCE.match(ref):
            raise SettingsError(f"{variable}.{name}: expected 'module:callable', got {ref!r}")
    return dict(value)


Built = TypeVar("Built")


class ReferenceCatalog(Generic[Built]):
    """Finds user code by the name start inputs use, building each once per process.

    Subclasses say what they hold: ``kind`` (how messages and the input field name it), ``error``
    (raised for an unknown name) and ``build`` (imports a reference and checks what it returns).

    Args:
        references: name -> ``"module:callable"``.
    """

    kind: ClassVar[str]
    error: ClassVar[type[Exception]]
    _built: ClassVar[dict[tuple[str, str], Any]]
    _lock: ClassVar[threading.Lock]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._built, cls._lock = {}, threading.Lock()  # one cache per kind of catalog

    def __init__(self, references: Mapping[str, str]) -> None:
        self.references = dict(references)

    @staticmethod
    def build(reference: str) -> Built:
        raise NotImplementedError

    def __call__(self, name: str) -> Built:
        """What ``name`` refers to (built once per process).

        Raises:
            error: naming the input field and the names that exist.
        """
        reference = self.references.get(name)
        if reference is None:
            known = ", ".join(sorted(self.references)) or "none"
            raise self.error(f"{self.kind}: unknown {self.kind} {name!r}; registered {self.kind}s: {known}")
        key = (name, reference)
        with self._lock:
            if key not in self._built:
                self._built[key] = type(self).build(reference)
            return self._built[key]


def forget_built() -> None:
    """Forget what every catalog built, so the next lookup imports and builds again.

    Only a local stack that reloads changed code calls it (``longstep local serve``); in Lambda a
    new code version is a new sandbox.
    """
    pending = list(ReferenceCatalog.__subclasses__())
    while pending:
        catalog = pending.pop()
        pending.extend(catalog.__subclasses__())
        with catalog._lock:
            catalog._built.clear()
