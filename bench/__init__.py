"""Benchmarks: a data generator and runners that print ratios against in-run references."""
