"""Storage backends for Delta tables: local files, ``file://``, ``s3://`` and ``memory://``.

Every backend honours one contract (atomic put-if-absent, lexicographic listing from a
start key without caches, read-after-write); see :mod:`lakequery.storage.base`.

Example:
    >>> from lakequery.storage import open_storage
    >>> st = open_storage("memory://storage-package-example")
    >>> st.put(st.join("hello.txt"), b"hi")
    >>> st.read(st.join("hello.txt"))
    b'hi'
    >>> st.delete(st.join("hello.txt"))
"""

from lakequery.storage.base import FileInfo, Storage
from lakequery.storage.uri import TableLocation, open_storage

__all__ = ["FileInfo", "Storage", "TableLocation", "open_storage"]
