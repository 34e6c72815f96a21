"""A table as a message queue between processes (issue 13): a producer appends many small
commits while another process compacts the table and a consumer follows it; the consumer
is killed with SIGKILL and restarted from the offset it stored. Every appended row
arrives exactly once, in commit order, and none of the compacted rows arrives again."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa

import lakequery as lq

COMMITS = 40
ROWS = 5

PRODUCER = textwrap.dedent(
    """
    import sys, time, pyarrow as pa, lakequery as lq
    uri, commits, rows, done = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    for c in range(commits):
        ids = pa.array(range(c * rows, (c + 1) * rows), pa.int64())
        lq.write(uri, pa.table({"id": ids}), mode="append")
        time.sleep(0.02)
    open(done, "w").close()
    """
)

COMPACTOR = textwrap.dedent(
    """
    import os, sys, time, lakequery as lq
    uri, done = sys.argv[1], sys.argv[2]
    runs = 0
    while not os.path.exists(done):
        lq.DeltaTable(uri).optimize()
        runs += 1
        time.sleep(0.1)
    lq.DeltaTable(uri).optimize()
    print("OPTIMIZE_RUNS", runs + 1)
    """
)

# Each batch's rows and the offset after it go out in one line, flushed and synced: the
# output and the stored offset can never disagree, whenever the process dies.
CONSUMER = textwrap.dedent(
    """
    import json, os, sys, lakequery as lq
    uri, out, last_id = sys.argv[1], sys.argv[2], int(sys.argv[3])
    offset = None
    if os.path.exists(out):
        for line in open(out).read().splitlines():
            try:
                offset = json.loads(line)["offset"]
            except ValueError:
                break  # a line cut short by the kill: its batch is read again
    stream = lq.DeltaTable(uri).stream(
        starting_offset=offset, follow=True, poll_interval=0.05, max_files_per_batch=3
    )
    with open(out, "a") as f:
        for batch in stream:
            ids = batch.to_arrow()["id"].to_pylist()
            f.write(json.dumps({"ids": ids, "versions": [batch.start_version, batch.end_version],
                                "offset": batch.offset.to_json()}) + "\\n")
            f.flush()
            os.fsync(f.fileno())
            if last_id in ids:
                break
    """
)


def _lines(out: Path) -> list[dict[str, object]]:
    rows = []
    for line in out.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            break
    return rows


def test_producer_compactor_and_a_killed_consumer(tmp_path: Path) -> None:
    uri = str(tmp_path / "queue")
    lq.write(uri, pa.table({"id": pa.array([], pa.int64())}))
    scripts = {}
    for name, code in (("producer", PRODUCER), ("compactor", COMPACTOR), ("consumer", CONSUMER)):
        scripts[name] = tmp_path / f"{name}.py"
        scripts[name].write_text(code)
    done, out = tmp_path / "done", tmp_path / "out.jsonl"
    last_id = COMMITS * ROWS - 1
    py = sys.executable

    def consumer() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [py, str(scripts["consumer"]), uri, str(out), str(last_id)],
            stderr=subprocess.PIPE,
            text=True,
        )

    reader = consumer()
    producer = subprocess.Popen(
        [py, str(scripts["producer"]), uri, str(COMMITS), str(ROWS), str(done)],
        stderr=subprocess.PIPE,
        text=True,
    )
    compactor = subprocess.Popen(
        [py, str(scripts["compactor"]), uri, str(done)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # kill the consumer once it has delivered a few batches, mid-stream
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(_lines(out)) < 3):
        assert reader.poll() is None, reader.stderr.read() if reader.stderr else ""
        time.sleep(0.02)
    os.kill(reader.pid, signal.SIGKILL)
    reader.wait()
    killed_after = len(_lines(out))
    assert killed_after >= 3
    reader = consumer()
    for proc in (producer, compactor, reader):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    lines = _lines(out)
    ids = [i for line in lines for i in line["ids"]]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)), "a row was delivered twice"
    assert sorted(ids) == list(range(COMMITS * ROWS)), "a row was lost"
    # commit order: every batch's rows come after the previous batch's
    batches = [sorted(line["ids"]) for line in lines if line["ids"]]  # type: ignore[type-var]
    assert all(a[-1] < b[0] for a, b in itertools.pairwise(batches))
    assert len(lines) > killed_after  # the restarted consumer delivered the rest
    ops = {e.operation for e in lq.DeltaTable(uri).history()}
    assert "OPTIMIZE" in ops  # compaction really ran beside the stream
