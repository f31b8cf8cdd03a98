"""The loop a team lives in (issue 34), measured as a new user meets it, side by side with a baseline.

For this tree and for the BASELINE revision, each in a fresh clone: ``make demo`` with the
package caches warm (and, with ``--cold``, this tree's with every cache empty); one line of a
triage tool edited, then the scenario run again; a declaration edited, then run again; a project
made by ``longstep init`` (its ``make demo`` and ``make test``); ``make test-fast`` (the same unit
and functional tests on the baseline, which had no target) and, with ``--suite``, ``make test``.
Every figure is wall seconds and the CPU seconds of the processes it ran, with the 1-minute load
average when it started. ``python -m bench.loop`` writes ``bench/results/loop.json`` and its
section of ``bench/RESULTS.md``.
"""
