"""PostgreSQL's IncrementalSource against a real database: chunks in key order (composite,
surrogate and nullable keys, additional conditions), read events as the initial snapshot's but
for the source block, the errors a table can end with, schema drift between chunks, the signal
table (captured, published, not snapshotted), watermark rows coming back through the stream, a
stream stopped and started again, and the blocking snapshot's own transaction."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from headwater import config as cfg
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.connectors.postgres.incremental import PgSnapshot, SnapshotWatermarks, parse_collection
from headwater.engine.records import SourceRecord
from headwater.engine.signals.connector import SnapshotTableError
from headwater.engine.snapshot_plan import SnapshotChunk
from headwater.relational.table import TableId
from helpers.capture import base_properties
from helpers.memory_sink import RecordingSink

SIGNAL = "public.debezium_signal"


def _source(pg_db, tmp_path, **extra: str):
    props = base_properties(pg_db, tmp_path, f"hw_inc_{uuid.uuid4().hex[:10]}",
                            **{"signal.data.collection": SIGNAL, **extra})
    connector = PostgresConnector(cfg.from_properties(props).connector)
    source = connector.capture_source(parallel=False)
    source.open()
    return connector, source


@pytest.fixture
def signal_db(pg_db):
    pg_db.execute("CREATE TABLE debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                  "data varchar(2048))")
    return pg_db


def _whole(t: Any) -> SnapshotChunk:
    return SnapshotChunk(t.table, t.raw_columns, t.collection, 0, 0, True, True, True, True, (), None, None, None,
                         None)


def _all_chunks(inc, collection, columns, limit, condition=None):
    maximum = inc.maximum_key(collection, columns, condition)
    chunks, after = [], None
    while maximum is not None:
        rows = inc.read_chunk(collection, columns, after, maximum, limit, condition)
        if not rows:
            break
        chunks.append(rows)
        after = rows[-1].chunk_key
    return maximum, chunks


def test_a_composite_key_is_chunked_in_order_and_rows_read_as_the_initial_snapshot_does(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE b (k1 integer, k2 varchar(10), txt text, amount numeric(10,2), at timestamp(3), "
               "tags text[], doc jsonb, raw bytea, PRIMARY KEY (k1, k2))")
    db.execute("INSERT INTO b SELECT g / 3, 'k' || (g % 3), E'tab\\there ' || g, g * 1.25, "
               "timestamp '2024-01-01' + g * interval '1 minute 0.5 second', ARRAY['x', 'y' || g], "
               "jsonb_build_object('g', g), decode(lpad(to_hex(g), 4, '0'), 'hex') FROM generate_series(1, 300) g")
    _, source = _source(db, tmp_path)
    inc = source.incremental_source()
    try:
        assert inc.chunk_columns("public.b", None) == ["k1", "k2"]
        maximum, chunks = _all_chunks(inc, "public.b", ["k1", "k2"], 64)
        assert maximum == ("100", "k0")
        assert [len(c) for c in chunks] == [64, 64, 64, 64, 44]
        keys = [r.chunk_key for c in chunks for r in c]
        assert keys == sorted(keys, key=lambda k: (int(k[0]), k[1])) and len(set(keys)) == 300
        assert [r.message_key for r in chunks[0][:2]] == [{"k1": 0, "k2": "k1"}, {"k1": 0, "k2": "k2"}]

        offset = {"lsn_commit": 900, "lsn": 880, "txId": 77, "last_commit_lsn": 850, "ts_usec": 1}
        events = inc.read_events("public.b", [r for c in chunks for r in c], offset)
        assert len(events) == 300
        first = events[0]
        assert first.topic == "dbserver1.public.b" and first.op == "r" and first.table == "public.b"
        assert first.offset is offset and first.key == {"k1": 0, "k2": "k1"}
        source_block = first.value["source"]
        assert source_block["snapshot"] == "incremental" and source_block["sequence"] == '["850","880"]'
        assert (source_block["txId"], source_block["lsn"], source_block["xmin"]) == (None, None, None)
        assert (source_block["schema"], source_block["table"]) == ("public", "b")
        assert first.value["before"] is None and first.value["op"] == "r"

        # the initial snapshot's events of the same rows: equal but for the source block
        point = source.open_blocking_snapshot()
        tables = {t.collection: t for t in source.snapshot_tables(point)}
        initial: list[Any] = []
        source.read_chunk(point, _whole(tables["public.b"]),
                          initial.append, threading.Event())
        source.close_snapshot(point)
        assert len(initial) == 300
        by_key = {tuple(sorted(r.key.items())): r for r in initial}
        for event in events:
            twin = by_key[tuple(sorted(event.key.items()))]
            assert event.value["after"] == twin.value["after"]
            assert event.value_schema == twin.value_schema and event.key_schema == twin.key_schema
        row = next(e for e in events if e.key == {"k1": 3, "k2": "k1"}).value["after"]
        assert row["txt"] == "tab\there 10" and row["tags"] == ["x", "y10"] and row["doc"] == '{"g": 10}'
    finally:
        source.close()


def test_conditions_surrogate_keys_and_nullable_keys_keep_every_chunk_inside_its_bounds(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE p (id integer PRIMARY KEY, color text, grp integer, code text)")
    db.execute("INSERT INTO p SELECT g, CASE WHEN g % 3 = 0 THEN 'blue' ELSE 'red' END, g % 7, "
               "CASE WHEN g % 10 = 0 THEN NULL ELSE 'c' || lpad(g::text, 3, '0') END FROM generate_series(1, 100) g")
    _, source = _source(db, tmp_path)
    inc = source.incremental_source()
    try:
        # an OR in the filter stays inside the chunk bounds (Debezium would append it bare)
        condition = "color = 'blue' OR grp = 1"
        wanted = {r[0] for r in db.execute(f"SELECT id FROM p WHERE {condition}")}
        _, chunks = _all_chunks(inc, "public.p", ["id"], 10, condition)
        got = [int(r.chunk_key[0]) for c in chunks for r in c]
        assert got == sorted(wanted)

        # a surrogate key: the chunks follow it
        assert inc.chunk_columns("public.p", "grp") == ["grp"]
        # a nullable surrogate key: NULLs sort last, every row once
        assert inc.chunk_columns("public.p", "code") == ["code"]
        maximum, chunks = _all_chunks(inc, "public.p", ["code"], 7)
        assert maximum == (None,)
        codes = [r.chunk_key[0] for c in chunks for r in c]
        # a non-unique surrogate key (the NULLs) cannot be chunked past: Debezium's behaviour too
        assert codes[:90] == sorted(c for c in codes if c is not None) and codes[90] is None
        assert len([c for c in codes if c is not None]) == 90

        with pytest.raises(SnapshotTableError) as err:
            inc.chunk_columns("public.p", "nope")
        assert err.value.status == "UNKNOWN_SCHEMA" and "nope" in str(err.value)
    finally:
        source.close()


def test_tables_without_key_missing_tables_and_message_key_columns(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE nokey (a integer, b text)")
    db.execute("CREATE TABLE keyed (id integer PRIMARY KEY, other integer NOT NULL)")
    db.execute("INSERT INTO keyed SELECT g, 100 - g FROM generate_series(1, 20) g")
    _, source = _source(db, tmp_path, **{"message.key.columns": "public.keyed:other"})
    inc = source.incremental_source()
    try:
        assert sorted(inc.captured_tables()) == ["public.keyed", "public.nokey"]  # not the signal table
        with pytest.raises(SnapshotTableError) as err:
            inc.chunk_columns("public.nokey", None)
        assert err.value.status == "NO_PRIMARY_KEY"
        with pytest.raises(SnapshotTableError) as err:
            inc.chunk_columns("public.gone", None)
        assert err.value.status == "UNKNOWN_SCHEMA"
        # Debezium chunks by the message key (its KeyMapper) when message.key.columns names one
        assert inc.chunk_columns("public.keyed", None) == ["other"]
        _, chunks = _all_chunks(inc, "public.keyed", ["other"], 8)
        assert [int(r.chunk_key[0]) for c in chunks for r in c] == list(range(80, 100))
        assert chunks[0][0].message_key == {"other": 80}
        with pytest.raises(SnapshotTableError) as err:
            inc.maximum_key("public.keyed", ["other"], "no_such_column = 1")
        assert err.value.status == "SQL_EXCEPTION"
        assert inc.maximum_key("public.keyed", ["other"], "other > 1000") is None  # the connection still works
        # a name as a signal may quote it (PG-41) is the id the table's records carry
        assert inc.collection_id('"public"."keyed"') == "public.keyed"
        assert inc.collection_id("public.keyed") == "public.keyed"
    finally:
        source.close()


def test_a_quoted_name_with_a_dot_is_snapshotted_and_deduplicated(signal_db, tmp_path):
    """PG-41: `"public"."My.Table"` in data-collections; the snapshot's table is the one streamed
    changes name (public.My.Table), so they evict its buffered rows."""
    from headwater.engine.signals.actions import SnapshotRequest
    from headwater.engine.signals.incremental import IncrementalSnapshotter

    signal_db.execute('CREATE TABLE "My.Table" (id integer PRIMARY KEY, v integer)')
    signal_db.execute('INSERT INTO "My.Table" SELECT g, g FROM generate_series(1, 5) g')
    _, source = _source(signal_db, tmp_path)
    inc = source.incremental_source()
    out: list[Any] = []
    try:
        snapshotter = IncrementalSnapshotter(inc, chunk_size=10, strategy="insert_insert", out=out.extend)
        snapshotter.add(SnapshotRequest("incremental", ['"public"."My.Table"']), "s1", {})
        assert [c.id for c in snapshotter.ctx.collections] == ["public.My.Table"]
        assert len(snapshotter.window) == 5
        snapshotter.open_window(snapshotter.ctx.chunk_id)
        snapshotter.evict(SourceRecord("t", None, {"id": 3}, None, {}, {}, op="u", table="public.My.Table"))
        assert len(snapshotter.window) == 4
    finally:
        source.close()


def test_a_changed_definition_between_chunks_is_read_again_or_fails_clearly(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE d (id integer PRIMARY KEY, v text)")
    db.execute("INSERT INTO d SELECT g, 'v' || g FROM generate_series(1, 30) g")
    _, source = _source(db, tmp_path)
    inc = source.incremental_source()
    try:
        maximum = inc.maximum_key("public.d", ["id"], None)
        first = inc.read_chunk("public.d", ["id"], None, maximum, 10, None)
        assert set(inc.read_events("public.d", first, {})[0].value["after"]) == {"id", "v"}
        db.execute("ALTER TABLE d ADD COLUMN extra integer DEFAULT 7")
        second = inc.read_chunk("public.d", ["id"], first[-1].chunk_key, maximum, 10, None)
        after = inc.read_events("public.d", second, {})[0].value["after"]
        assert after["extra"] == 7 and after["id"] == 11
        db.execute("ALTER TABLE d DROP CONSTRAINT d_pkey, DROP COLUMN id")
        with pytest.raises(SnapshotTableError) as err:
            inc.read_chunk("public.d", ["id"], second[-1].chunk_key, maximum, 10, None)
        assert err.value.status == "UNKNOWN_SCHEMA" and "chunk key" in str(err.value)
        db.execute("DROP TABLE d")
        with pytest.raises(SnapshotTableError) as err:
            inc.read_chunk("public.d", ["id"], second[-1].chunk_key, maximum, 10, None)
        assert err.value.status == "UNKNOWN_SCHEMA"
    finally:
        source.close()


def test_the_signal_table_is_captured_published_and_not_snapshotted(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE a (id integer PRIMARY KEY)")
    db.execute("INSERT INTO a VALUES (1)")
    db.execute("INSERT INTO debezium_signal VALUES ('s1', 'log', NULL)")
    _, source = _source(db, tmp_path, **{"table.include.list": "public.a",
                                         "publication.autocreate.mode": "filtered"})
    try:
        published = {r[0] for r in db.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables "
                                              "WHERE pubname = 'dbz_publication'")}
        assert published == {"public.a", SIGNAL}
        point = source.open_snapshot(None, False)
        assert [t.collection for t in source.snapshot_tables(point)] == ["public.a"]
        source.close_snapshot(point)
        assert source.incremental_source().captured_tables() == ["public.a"]
    finally:
        source.close()


def _records(collect: RecordingSink, table: str) -> list[SourceRecord]:
    """The change records of `table` among what the stream emitted."""
    with collect.changed:
        return [i for i in collect.records if isinstance(i, SourceRecord) and i.table == table and i.op]


def _wait(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_watermark_rows_come_back_through_a_stream_that_stops_and_starts_again(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE a (id integer PRIMARY KEY, v text)")
    connector, source = _source(db, tmp_path)
    assert connector.use_encoding_pool(object()) is False  # the signal stage must see the records
    inc = source.incremental_source()
    start = source.resume_offset(None)
    collect, stop = RecordingSink(), threading.Event()
    runner = threading.Thread(target=source.stream, args=(start, collect.write, stop), daemon=True)
    runner.start()
    try:
        inc.insert_signal("chunk-1-open", "snapshot-window-open", '{"openWindowTimestamp": "x"}')
        db.execute("INSERT INTO a VALUES (1, 'one')")
        inc.delete_signal("chunk-1-open")
        _wait(lambda: len(_records(collect, SIGNAL)) == 2 and _records(collect, "public.a"))
        opened, deleted = _records(collect, SIGNAL)
        assert opened.op == "c" and opened.value["after"] == {
            "id": "chunk-1-open", "type": "snapshot-window-open", "data": '{"openWindowTimestamp": "x"}'}
        assert deleted.op == "d" and deleted.value["before"]["id"] == "chunk-1-open"
        # stop promptly, then stream again on the same source from the last offset
        stop.set()
        runner.join(timeout=10)
        assert not runner.is_alive()
        last = dict(_records(collect, SIGNAL)[-1].offset)
        last.update(incremental_snapshot_correlation_id="sig-1", incremental_snapshot_primary_key="[]")
        assert source.resume_offset(last) == last  # the engine's keys are kept
        source.parse(last)  # and accepted
        db.execute("INSERT INTO a VALUES (2, 'two')")
        stop2 = threading.Event()
        runner = threading.Thread(target=source.stream, args=(last, collect.write, stop2), daemon=True)
        runner.start()
        _wait(lambda: len(_records(collect, "public.a")) == 2)
        assert [r.value["after"]["id"] for r in _records(collect, "public.a")] == [1, 2]  # nothing twice
        stop2.set()
        runner.join(timeout=10)
        assert not runner.is_alive()
    finally:
        stop.set()
        source.close()


def test_a_blocking_snapshot_reads_in_its_own_serializable_transaction(signal_db, tmp_path):
    db = signal_db
    db.execute("CREATE TABLE a (id integer PRIMARY KEY)")
    db.execute("INSERT INTO a SELECT generate_series(1, 5)")
    _, source = _source(db, tmp_path)
    inc = source.incremental_source()
    try:
        position = {"lsn_commit": 5000, "lsn": 4990, "txId": 824, "last_commit_lsn": 5000, "ts_usec": 1}
        point = inc.open_blocking_snapshot(position)
        conn = source._snapshot_conn
        with conn.cursor() as cur:
            cur.execute("SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only'), "
                        "current_setting('transaction_deferrable')")
            assert cur.fetchone() == ("serializable", "on", "on")
        db.execute("INSERT INTO a VALUES (6)")  # after the point: not read
        tables = {t.collection: t for t in source.snapshot_tables(point)}
        assert set(tables) == {"public.a"}
        records: list[Any] = []
        source.read_chunk(point, _whole(tables["public.a"]),
                          records.append, threading.Event())
        source.close_snapshot(point)
        assert [r.key["id"] for r in records] == [1, 2, 3, 4, 5]
        block = records[0].value["source"]
        # the stream position's, as Debezium's blocking snapshot (golden: blocking)
        assert (block["txId"], block["lsn"], block["sequence"]) == (824, 4990, '["5000","4990"]')
        assert records[0].offset == position
    finally:
        source.close()


def test_inserting_signals_needs_a_signal_table_and_writes_nothing_when_read_only(pg_db, tmp_path):
    props = base_properties(pg_db, tmp_path, f"hw_inc_{uuid.uuid4().hex[:10]}")
    connector = PostgresConnector(cfg.from_properties(props).connector)
    source = connector.capture_source(parallel=False)
    source.open()
    try:
        with pytest.raises(Exception, match=r"signal\.data\.collection"):
            source.incremental_source().insert_signal("x", "log", None)
    finally:
        source.close()
    pg_db.execute("CREATE TABLE debezium_signal (id text PRIMARY KEY, type text, data text)")
    _, source = _source(pg_db, tmp_path, **{"read.only": "true"})
    try:
        inc = source.incremental_source()
        with pytest.raises(Exception, match=r"read\.only"):
            inc.insert_signal("x", "log", None)
        assert isinstance(inc.window_marks("insert_insert"), SnapshotWatermarks)
        assert pg_db.execute("SELECT count(*) FROM debezium_signal")[0][0] == 0
    finally:
        source.close()


def _record(txid: int | None, topic: str = "dbserver1.public.a", offset: dict[str, Any] | None = None) -> SourceRecord:
    value = {"source": {"txId": txid}} if txid is not None else {"ts_ms": 1}
    return SourceRecord(topic, None, {"id": 1}, None, value, offset or {}, op="c" if txid else None)


def test_read_only_windows_open_and_close_by_transaction_ids(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE a (id integer PRIMARY KEY)")
    _, source = _source(pg_db, tmp_path, **{"read.only": "true", "heartbeat.interval.ms": "1000"})
    try:
        marks = source.incremental_source().window_marks("insert_insert")
        blocker = pg_db.connect(autocommit=False)  # a transaction in progress across the chunk
        with blocker.cursor() as cur:
            cur.execute("INSERT INTO a VALUES (1)")
            cur.execute("SELECT pg_current_xact_id()::text")
            running = int(cur.fetchone()[0])
        marks.open("c1")
        marks.close("c1")
        low, high = marks.low, marks.high
        assert running in low.xip and running in high.xip and low.xmin <= running
        assert marks.classify(_record(running), None) is None  # no chunk: nothing to say
        assert marks.classify(_record(running), "c1") == "open"
        assert marks.classify(_record(running), "c1") is None  # still inside
        assert marks.classify(_record(max(high.xmax, low.xmax) + 1), "c1") == "close"
        # an event of a transaction older than the low watermark closes a window it never opened
        marks.open("c2")
        marks.close("c2")
        assert marks.classify(_record(marks.low.xmin - 1), "c2") == "close"
        # heartbeats close once the stream has reached the high watermark's WAL position
        marks.open("c3")
        marks.close("c3")
        beat = "__debezium-heartbeat.dbserver1"
        assert marks.classify(_record(None, beat, {"lsn_commit": marks.high_lsn - 1}), "c3") is None
        assert marks.classify(_record(None, beat, {"lsn_commit": marks.high_lsn}), "c3") == "close"
        blocker.rollback()
    finally:
        source.close()


def test_pg_snapshot_text_and_collection_names_parse():
    assert PgSnapshot.parse("10:20:12,15") == PgSnapshot(10, 20, (12, 15))
    assert PgSnapshot.parse("10:10:") == PgSnapshot(10, 10, ())
    assert parse_collection("public.debezium_signal") == TableId(None, "public", "debezium_signal")
    assert parse_collection('"My.Schema"."Odd""Name"') == TableId(None, "My.Schema", 'Odd"Name')
    assert parse_collection("db.s.t") == TableId(None, "s", "t")
    with pytest.raises(ValueError):
        parse_collection("a..b")
