"""The one wheel of Longstep, built from the design card's top-level folders.

Each folder is the source of one top-level package: ``infra/`` deploys and operates
(``longstep_kit``), ``functions/`` holds the Lambda entry points (``longstep_functions``), and
``layers/runtime/`` is the runtime the Lambda layer ships (``longstep``). Everything else about the
distribution (name, version, dependencies, the ``longstep`` command) is in ``pyproject.toml``.
"""

from setuptools import find_packages, setup

PACKAGE_DIRS = {"longstep": "layers/runtime", "longstep_functions": "functions", "longstep_kit": "infra"}

setup(
    package_dir=PACKAGE_DIRS,
    packages=[name for package, folder in PACKAGE_DIRS.items() for name in (package, *(f"{package}.{sub}" for sub in find_packages(folder)))],
)
