"""Kernels of lakequery, each with a pure-Python reference twin.

- :mod:`udfs.dv_mask`: deletion-vector row indexes -> keep masks / selection vectors (numpy).
- :mod:`udfs.zorder`: clustering keys and Z-order / Hilbert curves (numba, compiled once per
  machine into the on-disk cache chosen by :mod:`udfs.numba_cache`).
"""
