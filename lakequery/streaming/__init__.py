"""Tables as message queues: read a Delta table as a stream of micro-batches.

Example:
    >>> import tempfile, pyarrow as pa, lakequery as lq
    >>> root = tempfile.mkdtemp()
    >>> _ = lq.write(root, pa.table({"id": [1, 2]}))
    >>> batches = list(lq.DeltaTable(root).stream())
    >>> [b.to_arrow().num_rows for b in batches]
    [2]
    >>> _ = lq.write(root, pa.table({"id": [3]}), mode="append")
    >>> more = list(lq.DeltaTable(root).stream(starting_offset=batches[-1].offset.to_json()))
    >>> [(b.start_version, b.to_arrow()["id"].to_pylist()) for b in more]
    [(1, [3])]
"""

from lakequery.streaming.batch import StreamBatch
from lakequery.streaming.offsets import StreamOffset
from lakequery.streaming.source import stream

__all__ = ["StreamBatch", "StreamOffset", "stream"]
