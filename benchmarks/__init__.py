"""Benchmarks for lakequery (snapshot load and scan) against deltalake / raw DuckDB / Polars.

Run everything with ``python -m benchmarks.run_all`` (``--quick`` for small sizes).
Generated data lives under ``benchmarks/data/`` (git-ignored).
"""
