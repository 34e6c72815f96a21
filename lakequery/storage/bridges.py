"""Helpers that expose a backend's fsspec filesystem to DuckDB under a private protocol.

DuckDB reads object-store paths through an fsspec filesystem registered on the
connection (``con.register_filesystem``), keyed by the filesystem's protocol name. Using
``s3`` as that name would collide when two tables with different credentials share a
connection, and could race with DuckDB's own ``httpfs`` autoloading. Each backend
configuration therefore gets a private protocol name (``lqs3<digest>``), a subclass of
the backend's filesystem class that accepts it, and paths are translated accordingly.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_CLASSES: dict[str, type[Any]] = {}
_LOCK = threading.Lock()


def private_protocol(protocol: str, fs_kwargs: Mapping[str, Any]) -> str:
    """Return the private DuckDB protocol name for one backend configuration.

    Args:
        protocol: The backend protocol (``"s3"``, ``"memory"``).
        fs_kwargs: The arguments the backend's filesystem is built from.

    Returns:
        A name such as ``"lqs3a1b2c3d4e5"``, equal for equal configurations.
    """
    import hashlib  # imported when an object store is bridged, not by local reads

    digest = hashlib.sha256(repr(sorted(fs_kwargs.items())).encode()).hexdigest()[:10]
    return f"lq{protocol}{digest}"


def bridge_class(base: type[Any], private: str, native: str) -> type[Any]:
    """Return a subclass of the fsspec class ``base`` that speaks ``private://`` paths.

    ``private://rest`` is rewritten to ``native://rest`` before ``base`` strips its
    protocol, so every operation lands on the same objects as the original filesystem.

    Args:
        base: The fsspec filesystem class to wrap (e.g. ``s3fs.S3FileSystem``).
        private: The private protocol name from :func:`private_protocol`.
        native: The protocol ``base`` understands (``"s3"``, ``"memory"``).
    """
    with _LOCK:
        cls = _CLASSES.get(private)
        if cls is None:
            prefix = f"{private}://"

            def _strip_protocol(klass: type[Any], path: Any) -> Any:
                if isinstance(path, str) and path.startswith(prefix):
                    path = f"{native}://{path[len(prefix) :]}"
                return base._strip_protocol(path)

            namespace = {
                "protocol": (private,),
                "_strip_protocol": classmethod(_strip_protocol),
                "__module__": __name__,
            }
            cls = type(f"DuckDBBridge_{private}", (base,), namespace)
            _CLASSES[private] = cls
        return cls
