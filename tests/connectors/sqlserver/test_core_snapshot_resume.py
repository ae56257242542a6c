"""Acceptance (SQL Server emulator): `headwater run` killed (SIGKILL) in the middle of an initial
snapshot read in chunks resumes it at the next chunk (a new snapshot transaction, the original
maximum LSN to stream from), and the events of both runs replayed in order end in the tables'
contents — with rows changed, deleted and inserted while it was down."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from test_core_streaming import snapshot_stored
from test_failures_kill import Runner, base_props, create_tables, events, max_version, table_contents

from headwater.engine.snapshot_resume import SnapshotProgress, progress_of
from helpers.sqlserver import SqlServerEmulator, wait_for

ROWS = 5000
CHUNK = 400


def _progress(runner: Runner) -> SnapshotProgress | None:
    try:
        (stored,) = json.loads(runner.offsets.read_text())["offsets"].values()
    except (OSError, ValueError, KeyError):
        return None
    return progress_of(stored)


def test_sigkill_mid_snapshot_resumes_at_the_next_chunk(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                        tmp_path: Path) -> None:
    create_tables(sqlserver, sqlserver_db, rows=ROWS)
    runner = Runner(base_props(sqlserver, [sqlserver_db], tmp_path, **{
        "encoding.workers": "0", "max.batch.size": "64", "max.queue.size": "128",
        "snapshot.chunk.rows": str(CHUNK)}), tmp_path)
    items, pairs = f"{sqlserver_db}.dbo.items", f"{sqlserver_db}.dbo.pairs"

    def under_way() -> bool:
        runner.assert_alive()
        progress = _progress(runner)
        return progress is not None and progress.table is not None and (
            progress.table == pairs or int(progress.after[0]) >= 3 * CHUNK)  # type: ignore[index]

    try:
        runner.start()
        wait_for(under_way, "several chunks of the snapshot to complete", 60, poll=0.01)
        runner.kill()
        progress = _progress(runner)
        assert progress is not None and progress.table in (items, pairs) and progress.after is not None
        done_tables = {t.rsplit(".", 1)[1] for t in progress.done}
        table, after = progress.table.rsplit(".", 1)[1], int(progress.after[0])
        first = events(runner.segments()[0])
        assert all(e.op == "r" for e in first)
        # while down: a row of a completed chunk changed, one deleted, one not read yet changed, one new
        with contextlib.closing(sqlserver.connect(sqlserver_db)) as conn:
            cur = conn.cursor()
            cur.execute("UPDATE dbo.items SET name = N'down', version = 1 WHERE id = 1")
            cur.execute("DELETE FROM dbo.items WHERE id = 2")
            cur.execute(f"UPDATE dbo.pairs SET note = N'down', version = 2 WHERE a = {ROWS - 1}")
            cur.execute(f"DELETE FROM dbo.pairs WHERE a = {ROWS - 2}")
            cur.execute("INSERT INTO dbo.items (id, name, version) VALUES (?, N'while down', 3)", ROWS + 1)
        wait_for(lambda: sqlserver.execute("SELECT COUNT(*) FROM cdc.dbo_items_CT", database=sqlserver_db)[0][0]
                 + sqlserver.execute("SELECT COUNT(*) FROM cdc.dbo_pairs_CT", database=sqlserver_db)[0][0]
                 == 2 + 4 + 3, "the capture of the changes made while down")  # updates: 2 rows each
        runner.start()
        wait_for(lambda: (runner.assert_alive(), snapshot_stored(runner.offsets))[1], "the resumed snapshot", 60)
        sqlserver.execute(f"INSERT INTO dbo.items (id, name, version) VALUES ({ROWS + 2}, N'streamed', 4)",
                          database=sqlserver_db)
        wait_for(lambda: (runner.assert_alive(), max_version(runner.current_run_output()))[1] >= 4,
                 "the change after the restart", 60)
        runner.stop()
    finally:
        runner.cleanup()

    assert "resuming the interrupted snapshot" in (tmp_path / "run2.log").read_text(errors="replace"), runner.logs()
    second = events(runner.segments()[1])
    reads = Counter((e.table, e.key) for e in first + second if e.op == "r")
    completed = [k for k, n in reads.items() if n > 1 and (k[0] in done_tables or (k[0] == table and k[1][0] < after))]
    assert not completed, f"rows of completed chunks read again: {completed[:10]}"
    second_reads = {(e.table, e.key) for e in second if e.op == "r"}
    assert not {k for k in second_reads if k[0] in done_tables or (k[0] == table and k[1][0] < after)}
    if table == "items":  # the rest of items was read after the restart: the new row with it
        assert ("items", (ROWS + 1,)) in second_reads
    # the stream starts at the original maximum LSN: the changes made while down come after the reads
    streamed = [(e.table, e.op) for e in second if e.op != "r"]
    assert streamed[:3] == [("items", "u"), ("items", "d"), ("pairs", "u")] and streamed[-1] == ("items", "c")
    last_read = max(i for i, e in enumerate(second) if e.op == "r")
    assert all(e.op == "r" for e in second[:last_read + 1])
    consumer: dict[str, dict[Any, Any]] = {"items": {}, "pairs": {}}
    for e in first + second:
        if e.op == "d":
            consumer[e.table].pop(e.key, None)
        else:
            consumer[e.table][e.key] = dict(e.row)
    assert consumer == table_contents(sqlserver, sqlserver_db), "replaying the events does not give the tables"
    markers = [r["value"]["source"]["snapshot"] for seg in runner.segments() for r in seg
               if isinstance(r.get("value"), dict) and r["value"].get("op") == "r"]
    assert markers[0] == "first" and markers[-1] == "last"
    assert markers.count("first") == 1 and markers.count("last") == 1
