"""`snapshot.isolation.mode`'s locks as a concurrent writer sees them (spec §1.2, MS-11;
Debezium's lockTablesForSchemaSnapshot / releaseSchemaSnapshotLocks): `exclusive` holds its
TABLOCKX table locks to the end of the snapshot's transaction, so a writer's INSERT issued while
the rows are read waits until the whole snapshot is read; `repeatable_read` rolls back to its
savepoint after the schema step, releasing them, so the writer's INSERT returns while the rows
are still being read.

When the INSERT returned is measured by the snapshot records in the output at that moment. The
output trails what the connector has read by at most the engine's snapshot hand-over buffer, its
queue and one batch (`LAG`), so "the INSERT returned before the connector had read the last
rows" and "... after it had read all of them" are both decidable from the output."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from test_core_streaming import snapshot_stored
from test_failures_kill import Runner, base_props, create_tables, events, max_version

from headwater.engine.capture import _SNAPSHOT_HANDOFF
from helpers.sqlserver import SqlServerEmulator, wait_for

ROWS = 3000              # per table; below SQL Server's lock escalation threshold (5000 locks), so that
#                          repeatable_read's row locks on rows already read do not become a table lock
QUEUE, BATCH = 100, 50   # max.queue.size, max.batch.size
# + the records the connector and the engine each hold back for the `last` marker
LAG = _SNAPSHOT_HANDOFF + QUEUE + BATCH + 2


def snapshot_records(runner: Runner) -> int:
    return runner.output().count(b'"op":"r"')


@pytest.mark.parametrize("mode", ["exclusive", "repeatable_read"])
def test_a_writer_waits_for_exclusive_but_not_for_repeatable_read(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                                   tmp_path: Path, mode: str) -> None:
    create_tables(sqlserver, sqlserver_db, rows=ROWS)
    total = 2 * ROWS
    assert total > 2 * LAG + 1000, "the snapshot is too short to tell the modes apart"
    # the rows encoded on the engine's thread (no encoding workers) into a short queue: the
    # snapshot lasts about a second and the output follows the connector closely
    runner = Runner(base_props(sqlserver, [sqlserver_db], tmp_path, **{
        "snapshot.isolation.mode": mode, "encoding.workers": "0", "max.queue.size": str(QUEUE),
        "max.batch.size": str(BATCH)}), tmp_path)
    with contextlib.closing(sqlserver.connect(sqlserver_db)) as writer:
        cur = writer.cursor()
        cur.execute("SET LOCK_TIMEOUT 30000")  # a bound on the wait, far above the snapshot's length
        try:
            runner.start()
            # the rows are being read: the schema step (locks, maximum LSN, structure) is over
            wait_for(lambda: (runner.assert_alive(), snapshot_records(runner))[1] > 0, "the snapshot's first rows",
                     60, poll=0.005)
            before = snapshot_records(runner)
            started = time.monotonic()
            cur.execute("INSERT INTO dbo.items (id, name, version) VALUES (?, N'writer', 1)", ROWS + 1)
            waited = time.monotonic() - started
            after = snapshot_records(runner)
            wait_for(lambda: (runner.assert_alive(), snapshot_stored(runner.offsets))[1], "the snapshot's end", 60)
            wait_for(lambda: (runner.assert_alive(), max_version(runner.current_run_output()))[1] >= 1,
                     "the writer's insert to be streamed", 60)
            runner.stop()
        finally:
            runner.cleanup()

    got = events([r for s in runner.segments() for r in s])
    read = {(e.table, e.key) for e in got if e.op == "r"}
    seeded = {(t, (i,) if t == "items" else (i, f"k{i % 3}")) for t in ("items", "pairs") for i in range(1, ROWS + 1)}
    assert seeded <= read <= seeded | {("items", (ROWS + 1,))}
    assert [e.key for e in got if e.op == "c"] == [(ROWS + 1,)]
    assert before + LAG < total, f"the INSERT was issued after the snapshot had read its rows ({before} of {total})"
    report = (f"{mode}: the INSERT issued with {before} of {total} snapshot rows out returned after {waited:.2f} s, "
              f"with {after} out")
    print(report)
    if mode == "exclusive":
        # it waited for the end of the snapshot's transaction, which comes after the last row is read
        assert after >= total - LAG, f"the INSERT did not wait for the exclusive locks: {report}"
        assert ("items", (ROWS + 1,)) not in read  # it committed after the rows were read
    else:
        # it returned while the connector still had rows to read: the transaction was still open
        assert after + LAG < total, f"the INSERT waited, as if repeatable_read kept its table locks: {report}"
