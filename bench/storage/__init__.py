"""Storage benchmark: one simulated coding session checkpointed four ways on moto.

Run ``make bench-storage`` (or ``.venv/bin/python -m bench.storage``); see ``bench/RESULTS.md``.
"""
