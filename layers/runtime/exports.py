"""Public names loaded on first use: what a package's ``__init__`` exports without importing it all.

A package lists ``name -> defining module`` and gets the module-level ``__getattr__`` and
``__dir__`` of PEP 562 from :func:`lazy_exports`, so ``import longstep`` in a Lambda costs nothing
until a name is used, and the package's list of public names is one literal a test can pin.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str | None], namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the package's name (``__name__``).
        exports: each public name -> the module that defines it, or None for a submodule of that name.
        namespace: the package's ``globals()``; a name once loaded is kept there.
    """
    names = sorted([*exports, *(name for name in namespace.get("__all__", ()) if name not in exports)])

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = exports[name]
        value = importlib.import_module(f"{package}.{name}") if module is None else getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__
