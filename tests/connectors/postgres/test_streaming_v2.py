"""Large transactions streamed while in progress (pgoutput protocol 2, `streaming 'on'`): the
events are exactly those of the protocol-1 path, memory stays bounded, and a restart in the middle
of a stream loses nothing.

The databases set `logical_decoding_work_mem` to its 64kB minimum (ALTER DATABASE applies to the
walsender of a logical replication connection too), so the server streams every transaction
larger than a few hundred rows instead of a few hundred thousand. Both paths read the same WAL
through two slots created before the workload, so LSNs, transaction ids and commit times agree
and only the processing times in the envelopes differ."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_crash_restart import Runner

from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait

ITEMS = "dbserver1.public.items"


def _low_work_mem(db: Any) -> None:
    db.execute(f'ALTER DATABASE "{db.name}" SET logical_decoding_work_mem = \'64kB\'')


def _setup(db: Any) -> None:
    _low_work_mem(db)
    db.execute("CREATE TABLE items (id int PRIMARY KEY, val text, amount numeric(12,2))")
    db.execute("CREATE TABLE other (id int PRIMARY KEY, v text)")
    db.execute("CREATE TABLE third (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")


def _slots(db: Any, *names: str) -> None:
    for name in names:  # before the workload: every slot then sees exactly the same changes
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def _slot_stats(db: Any, slot: str) -> tuple[int, int]:
    """(transactions streamed, transactions spilled on the server) of a slot."""
    deadline = time.monotonic() + 10
    while True:  # the walsender reports its statistics when it exits
        rows = db.execute("SELECT stream_txns, spill_txns FROM pg_stat_replication_slots WHERE slot_name = %s",
                          (slot,))
        if (rows and (rows[0][0] or rows[0][1])) or time.monotonic() > deadline:
            return rows[0] if rows else (0, 0)
        time.sleep(0.2)


def _workload(db: Any) -> None:
    """Interleaved large transactions, small ones committing in between, a large one rolled back,
    savepoints rolled back (nested ones too), a schema change and a logical message inside a
    streamed transaction, and one whose every change is in a rolled-back savepoint."""
    a, b, c, d = (db.connect(autocommit=False) for _ in range(4))
    ca, cb, cc, cd = (x.cursor() for x in (a, b, c, d))
    ca.execute("INSERT INTO items SELECT g, 'a' || g, g * 1.5 FROM generate_series(1, 3000) g")
    cb.execute("INSERT INTO other SELECT g, 'b' || g FROM generate_series(1, 3000) g")
    cc.execute("INSERT INTO items VALUES (900001, 'small before', 1)")
    c.commit()
    cd.execute("INSERT INTO items SELECT g, 'aborted' || g, 0 FROM generate_series(500001, 503000) g")
    ca.execute("UPDATE items SET val = 'u' || id WHERE id % 3 = 0")
    cb.execute("UPDATE other SET v = 'ub' || id WHERE id % 5 = 0")
    cc.execute("INSERT INTO items VALUES (900002, 'small between', 2)")
    c.commit()
    b.commit()       # commits before a, although a started first
    d.rollback()     # a streamed transaction aborted as a whole
    ca.execute("SAVEPOINT s1")
    ca.execute("INSERT INTO items SELECT g, 's1 ' || g, 1 FROM generate_series(10001, 12000) g")
    ca.execute("SAVEPOINT s2")
    ca.execute("INSERT INTO items SELECT g, 's2 ' || g, 2 FROM generate_series(12001, 12500) g")
    ca.execute("RELEASE SAVEPOINT s2")
    ca.execute("ROLLBACK TO SAVEPOINT s1")   # drops s1 and its released child s2
    ca.execute("SAVEPOINT s3")
    ca.execute("INSERT INTO items SELECT g, 's3 ' || g, 3 FROM generate_series(13001, 14000) g")
    ca.execute("RELEASE SAVEPOINT s3")       # kept
    ca.execute("SELECT pg_logical_emit_message(true, 'big', 'inside a streamed transaction')")
    ca.execute("DELETE FROM items WHERE id BETWEEN 100 AND 400")
    ca.execute("UPDATE items SET id = id + 200000 WHERE id BETWEEN 1000 AND 1010")   # key changes
    cc.execute("INSERT INTO items VALUES (900003, 'small during', 3)")
    c.commit()
    a.commit()
    # a schema change inside a streamed transaction
    cb.execute("INSERT INTO third SELECT g, 't' || g FROM generate_series(1, 1500) g")
    cb.execute("ALTER TABLE third ADD COLUMN extra text DEFAULT 'x'")
    cb.execute("INSERT INTO third SELECT g, 't' || g, 'e' || g FROM generate_series(1501, 3000) g")
    cb.execute("TRUNCATE other")
    b.commit()
    # every change in a rolled-back savepoint: nothing to emit
    cd.execute("SAVEPOINT sp_only")
    cd.execute("INSERT INTO items SELECT g, 'gone', 0 FROM generate_series(600001, 603000) g")
    cd.execute("ROLLBACK TO SAVEPOINT sp_only")
    d.commit()
    cc.execute("INSERT INTO items VALUES (900004, 'small after', 4)")
    c.commit()
    for x in (a, b, c, d):
        x.close()


def _strict(record: dict[str, Any]) -> dict[str, Any]:
    """Mask only what differs between two runs over the same WAL: processing times."""
    value = record.get("value")
    payload = value.get("payload") if isinstance(value, dict) and "schema" in value else value
    if isinstance(payload, dict):
        for k in ("ts_ms", "ts_us", "ts_ns"):
            if k in payload and "source" in payload:
                payload[k] = "<ts>"
        source = payload.get("source")
        if isinstance(source, dict) and payload.get("op") == "m" and payload.get("transaction") is None \
                and source.get("txId") is None:
            for k in ("ts_ms", "ts_us", "ts_ns"):  # a non-transactional message is stamped when seen
                source[k] = "<ts>"
    for h in record.get("headers") or []:
        if h.get("key") == "__debezium.context.runId":
            h["value"] = "<runId>"
    return record


def _capture(db: Any, tmp: Path, slot: str, caplog: Any, **extra: str) -> list[dict[str, Any]]:
    tmp.mkdir()
    props = base_properties(db, tmp, slot, **{"snapshot.mode": "no_data", "skipped.operations": "none",
                                              "slot.drop.on.stop": "false", **extra})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="headwater"):
        capture = RunningCapture(props, tmp / "out.jsonl").start()
        try:
            emit_sentinel_and_wait(db, capture, timeout=180, quiet=0.5)
        finally:
            capture.stop()
    streamed = any("in-progress transactions are streamed" in r.getMessage() for r in caplog.records)
    assert streamed == (extra.get("streaming.in.progress.transactions", "auto") != "off")
    return [_strict(r) for r in drop_sentinels(capture.records())]


def _ids(records: list[dict[str, Any]], topic: str = ITEMS) -> list[int]:
    out = []
    for r in records:
        if r["topic"] == topic and r["value"] is not None:
            p = r["value"]["payload"]
            row = p["after"] if p["op"] != "d" else p["before"]
            out.append(row["id"])
    return out


@pytest.mark.parametrize("mode", ["sequential", "workers"])
def test_a_streamed_transactions_relations_are_read_once_its_commit_is_visible(pg_db, tmp_path, caplog,
                                                                              monkeypatch, mode):
    """A replayed streamed transaction's Relation messages come before its BEGIN. Their catalog
    lookup waits for the transaction's commit to be visible all the same (the server sends a
    commit a moment before other sessions see it), so the lookup gets the transaction's xid."""
    from headwater.connectors.postgres.metadata import CatalogReader

    _low_work_mem(pg_db)
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, val text, amount numeric(12,2))")
    pg_db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    _slots(pg_db, "hw_rel")
    lookups: list[tuple[str, int | None]] = []
    read_relation = CatalogReader.read_relation

    def recording(self: Any, table_id: Any, columns: Any, replica_identity: Any = None,
                  committed_xid: int | None = None) -> Any:
        lookups.append((table_id.table, committed_xid))
        return read_relation(self, table_id, columns, replica_identity, committed_xid)

    monkeypatch.setattr(CatalogReader, "read_relation", recording)
    conn = pg_db.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT txid_current() % 4294967296")  # pgoutput sends 32-bit xids
            xid = cur.fetchone()[0]
            cur.execute("INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 3000) g")
        conn.commit()
    finally:
        conn.close()
    extra = {"encoding.workers": "2"} if mode == "workers" else {"encoding.workers": "0"}
    records = _capture(pg_db, tmp_path / "run", "hw_rel", caplog, **{
        "streaming.in.progress.transactions": "on", "streaming.spool.directory": str(tmp_path / "spool"),
        **extra})
    assert len(_ids(records)) == 3000
    assert lookups and set(lookups) == {("items", xid)}, lookups


@pytest.mark.parametrize("mode", ["metadata", "workers"])
def test_streamed_transactions_emit_exactly_the_protocol_1_events(pg_db, tmp_path, caplog, mode):
    _setup(pg_db)
    _slots(pg_db, "hw_v1", "hw_v2")
    _workload(pg_db)
    extra = ({"provide.transaction.metadata": "true", "encoding.workers": "0"} if mode == "metadata"
             else {"encoding.workers": "2"})
    spool_dir = tmp_path / "spool"
    v1 = _capture(pg_db, tmp_path / "v1", "hw_v1", caplog, **{"streaming.in.progress.transactions": "off"},
                  **extra)
    v2 = _capture(pg_db, tmp_path / "v2", "hw_v2", caplog, **{"streaming.in.progress.transactions": "on",
                                                              "streaming.spool.directory": str(spool_dir),
                                                              "streaming.spool.memory.bytes": "65536"}, **extra)
    # the server streamed on the protocol-2 slot and spilled on the protocol-1 one
    streamed_v2, _ = _slot_stats(pg_db, "hw_v2")
    streamed_v1, spilled_v1 = _slot_stats(pg_db, "hw_v1")
    assert streamed_v2 >= 4 and streamed_v1 == 0 and spilled_v1 >= 4, (streamed_v2, streamed_v1, spilled_v1)
    assert not spool_dir.exists() or not any(spool_dir.iterdir()), "spool files left after the stop"

    items = _ids(v1)
    assert not {i for i in items if 500001 <= i <= 503000 or 10001 <= i <= 12500 or 600001 <= i <= 603000}, \
        "changes of an aborted transaction or a rolled-back savepoint were emitted"
    assert len([i for i in items if 13001 <= i <= 14000]) == 1000
    small = [i for i in items if i > 900000]
    assert small == [900001, 900002, 900003, 900004]
    if mode == "metadata":
        tx = [r for r in v1 if r["topic"] == "dbserver1.transaction"]
        assert len(tx) == 2 * 7  # 4 small, a, b twice; not the aborted ones nor the emptied one
    assert len(v2) == len(v1) > 10_000
    for n, (got, want) in enumerate(zip(v2, v1, strict=True)):
        assert got == want, f"event {n} differs:\nprotocol 2: {json.dumps(got)[:1500]}\n" \
                            f"protocol 1: {json.dumps(want)[:1500]}"


def test_sigkill_while_a_transaction_is_streamed_loses_nothing(pg_db, tmp_path):
    """Killed while a streamed transaction is open (spooled, not committed): the restarted run
    empties the stale spool, gets the transaction again from its start and emits it once."""
    _setup(pg_db)
    spool = tmp_path / "spool"
    runner = Runner(pg_db, tmp_path, f"hw_v2kill_{uuid.uuid4().hex[:8]}",
                    **{"snapshot.mode": "no_data", "table.include.list": "public.items",
                       "streaming.spool.directory": str(spool), "streaming.spool.memory.bytes": "0"})
    big = pg_db.connect(autocommit=False)
    try:
        runner.start()
        pid = runner.wait_streaming()
        cur = big.cursor()
        cur.execute("INSERT INTO items SELECT g, 'big' || g, g FROM generate_series(1, 20000) g")
        pg_db.execute("INSERT INTO items VALUES (900001, 'small 1', 1)")
        deadline = time.monotonic() + 60
        while not (list(spool.glob("*/*.spool")) and b"small 1" in (runner.out.read_bytes()
                                                                   if runner.out.exists() else b"")):
            assert time.monotonic() < deadline, f"nothing spooled\n{runner.logs()}"
            time.sleep(0.05)
        runner.kill()
        (stale,) = spool.iterdir()
        assert list(stale.glob("*.spool")), "SIGKILL should leave the open transaction's spool file"
        (stale / "leftover.spool").write_bytes(b"garbage from an earlier run")
        runner.start()
        runner.wait_streaming(not_pid=pid)
        deadline = time.monotonic() + 30
        while (stale / "leftover.spool").exists():
            assert time.monotonic() < deadline, "the restarted run did not empty the spool directory"
            time.sleep(0.05)
        cur.execute("UPDATE items SET val = 'changed' WHERE id <= 5000")
        pg_db.execute("INSERT INTO items VALUES (900002, 'small 2', 2)")
        big.commit()
        runner.wait_for_sentinel(timeout=120)
        assert runner.terminate() == 0
        first, second = runner.segments()
    finally:
        big.close()
        runner.cleanup()
    assert not spool.exists() or not any(p for p in spool.rglob("*") if p.is_file()), "spool left after the stop"

    def events(records: list[dict[str, Any]]) -> list[tuple[str, int]]:
        return [(r["value"]["op"], (r["value"]["after"] or r["value"]["before"])["id"]) for r in records
                if r["topic"] == ITEMS and r["value"] is not None]

    assert events(first) == [("c", 900001)]
    replayed = events(second)
    if replayed[:1] == [("c", 900001)]:  # delivered, but the kill came before its offset was stored
        replayed = replayed[1:]
    assert replayed == ([("c", 900002)] + [("c", i) for i in range(1, 20001)]
                              + [("u", i) for i in range(1, 5001)])


def test_sigkill_while_a_streamed_commit_is_delivered_resumes_inside_it(pg_db, tmp_path):
    """The stored position inside a streamed transaction (messages done) works as for protocol 1."""
    _setup(pg_db)
    slot = f"hw_v2resume_{uuid.uuid4().hex[:8]}"
    runner = Runner(pg_db, tmp_path, slot, **{"snapshot.mode": "no_data", "encoding.workers": "2",
                                                       "table.include.list": "public.items",
                                                       "max.batch.size": "512", "max.queue.size": "2048"})
    try:
        runner.start()
        runner.wait_streaming()
        offset = runner.kill_inside_transaction(
            "INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 60000) g", 5_000_000)
        first, second = runner.restart_to_sentinel(timeout=120)
    finally:
        runner.cleanup()
    streamed, _ = _slot_stats(pg_db, slot)
    assert streamed >= 1

    def ids(lines: list[dict[str, Any]]) -> list[int]:
        return [r["key"]["id"] for r in lines if r["topic"] == ITEMS]

    before, after = ids(first), ids(second)
    assert sorted(set(before) | set(after)) == list(range(1, 60001)), "changes were lost"
    assert after[0] > 1 and after[0] == offset["tx_msgs"] + 1
    assert after == list(range(after[0], 60001))


# -- two million rows ---------------------------------------------------------------------------------


class PeakRss(threading.Thread):
    """Samples VmHWM (peak resident set) of a process and its children until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peaks: dict[int, int] = {}
        self.done = threading.Event()

    def _children(self) -> list[int]:
        out = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    if int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == self.pid:
                        out.append(int(p.name))
                except (OSError, ValueError, IndexError):
                    pass
        return out

    def run(self) -> None:
        while not self.done.wait(0.25):
            for pid in [self.pid, *self._children()]:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                m = re.search(r"VmHWM:\s+(\d+) kB", status)
                if m:
                    self.peaks[pid] = max(self.peaks.get(pid, 0), int(m.group(1)) * 1024)

    def stop(self) -> tuple[int, int]:
        """(peak of the main process, sum of the peaks of all processes) in bytes."""
        self.done.set()
        self.join(5)
        return self.peaks.get(self.pid, 0), sum(self.peaks.values())


def _normalized_lines(path: Path) -> Any:
    """The output's lines without what varies between two runs over the same WAL — the
    envelope's processing times (the last `"ts_ms":…,"ts_us":…,"ts_ns":…` of a line, after the
    source block) and the runId header (the last header) — and without sentinels (each slot also
    sees the other run's), read in a streaming way (string operations only: 2M lines)."""
    with path.open("rb") as f:
        for line in f:
            if b"__hw_sentinel_" in line:
                continue
            i = line.rfind(b',"ts_ms":')
            j = line.find(b"}", i)
            k = line.find(b'"__debezium.context.runId"', j)
            yield line[:i] + line[j:k]


def _wait_for_sentinel(runner: Runner, timeout: float) -> None:
    """Emit a sentinel and wait until it is in the output, looking only at the file's tail."""
    prefix = f"__hw_sentinel_{uuid.uuid4().hex}".encode()
    runner.db.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (prefix.decode(),))
    deadline = time.monotonic() + timeout
    while True:
        runner.assert_alive()
        if runner.out.exists():
            with runner.out.open("rb") as f:
                size = f.seek(0, 2)
                f.seek(max(size - 4096, 0))
                if prefix in f.read():
                    return
        assert time.monotonic() < deadline, f"not done after {timeout}s\n{runner.logs()}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 1.5 minutes on 2 idle cores; much more on a loaded machine
def test_million_row_transaction_streams_in_bounded_memory(pg_db, tmp_path):
    """One INSERT of 1,000,000 rows, captured while it runs with protocol 2 (spooled, emitted at
    commit), then from a second slot with protocol 1: the same events, and the protocol-2 process
    stays small. Prints the figures (pytest -s)."""
    rows = 1_000_000
    _low_work_mem(pg_db)
    pg_db.execute("CREATE TABLE items (id int PRIMARY KEY, val text NOT NULL)")
    pg_db.execute("CREATE PUBLICATION dbz_publication FOR ALL TABLES")
    _slots(pg_db, "hw_big_v1", "hw_big_v2")
    runners = {}
    for name, mode in (("v2", "on"), ("v1", "off")):
        workdir = tmp_path / name
        workdir.mkdir()
        runners[name] = Runner(pg_db, workdir, f"hw_big_{name}", **{
            "snapshot.mode": "no_data", "streaming.in.progress.transactions": mode,
            "streaming.spool.directory": str(workdir / "spool"), "offset.flush.interval.ms": "1000"})
    figures = {}
    try:
        for name in ("v2", "v1"):
            runner = runners[name]
            runner.start()
            assert runner.proc is not None
            rss = PeakRss(runner.proc.pid)
            rss.start()
            if name == "v2":
                runner.wait_streaming()
                t0 = time.monotonic()
                pg_db.execute(f"INSERT INTO items SELECT g, 'v' FROM generate_series(1, {rows}) g")
                insert_s = time.monotonic() - t0
            t1 = time.monotonic()
            _wait_for_sentinel(runner, timeout=600)
            seconds = time.monotonic() - t1
            assert runner.terminate() == 0, runner.logs()
            figures[name] = (seconds, *rss.stop())
            print(f"\n{name}: {seconds:.1f} s after the commit", flush=True)
    finally:
        for runner in runners.values():
            runner.cleanup()
    streamed, _ = _slot_stats(pg_db, "hw_big_v2")
    assert streamed >= 1, "the server did not stream the transaction"
    report = (f"insert {insert_s:.1f} s (protocol 2 receiving meanwhile); after the commit: " + ", ".join(
        f"{n}: {s:.1f} s ({rows / s:,.0f} rows/s), peak RSS main {m / 2**20:.0f} MiB, all processes "
        f"{t / 2**20:.0f} MiB" for n, (s, m, t) in figures.items()))
    print(f"\n{rows:,}-row transaction: {report}")
    n = 0
    for n, (got, want) in enumerate(zip(_normalized_lines(runners["v2"].out), _normalized_lines(runners["v1"].out),
                                        strict=True), 1):
        assert got == want, f"line {n} differs:\nprotocol 2: {got[:1500]!r}\nprotocol 1: {want[:1500]!r}"
    assert n == rows
    _, main, total = figures["v2"]
    # the spool keeps it near protocol 1's (the test prints both; bench/README.md has a run's);
    # holding the transaction's 1,000,000 messages in memory instead would add well over 100 MiB
    # (~100 bytes each at least)
    assert main < 110 * 2**20 and total < 400 * 2**20, report
