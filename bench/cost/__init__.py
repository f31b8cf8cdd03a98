"""Cost benchmark: the infrastructure cost of 1,000 agent turns, from the counts of local runs.

Run ``make bench-cost`` (or ``.venv/bin/python -m bench.cost``); it writes
``bench/results/cost.json`` and the cost section of ``bench/RESULTS.md``.
"""
