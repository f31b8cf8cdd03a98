"""Benchmarks; each has its own package and writes its results under ``bench/results/``."""
