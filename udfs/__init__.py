"""numba kernels of lakequery, each with a pure-Python reference twin.

- :mod:`udfs.dv_mask`: deletion-vector row indexes -> keep masks / selection vectors.
"""
