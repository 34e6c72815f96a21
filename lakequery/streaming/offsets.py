"""Where a stream stands: the last data file it delivered.

A stream delivers data files in a fixed order: first, when it starts without a starting
version, the files of the snapshot it starts from (ordered by modification time, then
path), then the files each later commit adds with ``dataChange=true`` (in a commit: by
path). An offset names the last file delivered by its version and its index in that
order; resuming delivers everything after it. Commit files never change, so the order is
the same on every run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from lakequery.errors import StreamError


@dataclass(frozen=True, order=True)
class StreamOffset:
    """The position after a delivered batch; JSON-serialisable with :meth:`to_json`.

    Attributes:
        version: the version of the last file delivered (the snapshot's version while
            the stream still reads its starting snapshot).
        index: that file's index within its version's files (``-1``: none of that
            version's files yet; everything before the version was delivered).
        snapshot: True while the position is inside the starting snapshot's files.
        table_id: the table's ``metaData.id``; a replaced table is refused on resume.
    """

    version: int
    index: int
    snapshot: bool
    table_id: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, value: StreamOffset | str | dict[str, Any], uri: str = "") -> StreamOffset:
        """An offset from what :meth:`to_json` wrote (or its dict, or an offset); errors
        name the table ``uri`` it was meant for."""
        if isinstance(value, StreamOffset):
            return value
        try:
            doc = json.loads(value) if isinstance(value, str) else dict(value)
            return cls(
                version=int(doc["version"]),
                index=int(doc["index"]),
                snapshot=bool(doc["snapshot"]),
                table_id=str(doc["table_id"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StreamError(uri, f"not a stream offset: {value!r} ({exc})") from exc


__all__ = ["StreamOffset"]
