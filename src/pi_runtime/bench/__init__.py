"""Benchmarks behind `pi bench`: programs that print tables and write CSV/JSON/PNG."""
