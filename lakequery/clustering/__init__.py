"""Liquid clustering (digest §4.8, §14): the ``delta.clustering`` domain, creating clustered
tables, changing their clustering columns and clustering OPTIMIZE.

Modules: :mod:`~lakequery.clustering.domain` (read and write the domain, resolve the
columns), :mod:`~lakequery.clustering.create` (what a new clustered table commits),
:mod:`~lakequery.clustering.alter` (``set_clustering_columns``) and
:mod:`~lakequery.clustering.optimize` (incremental Hilbert clustering in OPTIMIZE).
"""

from __future__ import annotations
