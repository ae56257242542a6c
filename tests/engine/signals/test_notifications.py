"""Notifications (headwater.engine.signals.notifications) against Debezium 3.6.3.

The sink records are compared byte for byte with the notification lines recorded from Debezium
(tests/conformance/signals/golden): the calls are the ones the scenario's snapshot makes, and only
what varies per run (random ids, clock timestamps) is taken over from the recorded line. The
HashMap/HashSet order Debezium's JSON inherits is checked against a real JVM.
"""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import json
import logging
import random
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from emulators.sqlserver.jvm.launch import java_executable, source_launcher_problem
from headwater.config import connector_fields
from headwater.config.configuration import ConfigError, Configuration
from headwater.engine.records import SourceRecord
from headwater.engine.signals.notifications import (
    NotificationService,
    _copied_map_capacity,
    _hash_set_capacity,
    java_hash_order,
    java_text,
)
from headwater.serialization.json import JsonConverter, RecordSerializer

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
GOLDEN = Path(__file__).resolve().parents[2] / "conformance" / "signals" / "golden"
TOPIC = "dbserver1.notifications"
BASE = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "localhost", "database.user": "postgres", "database.dbname": "db",
    "topic.prefix": "dbserver1",
}


def config(**extra: str) -> Configuration:
    return Configuration.build({**BASE, **extra}, connector_fields("postgresql"))


def problems(**extra: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config(**extra)
    return info.value.problems


@dataclass
class Coll:
    id: str


@dataclass
class Ctx:
    """The attributes the incremental notifications read (the engine's IncrementalContext)."""

    collections: list[Coll]
    correlation_id: str | None
    maximum_key: tuple[Any, ...] | None = None
    chunk_end: tuple[Any, ...] | None = None

    @property
    def current(self) -> Coll | None:
        return self.collections[0] if self.collections else None


@dataclass
class Recorded:
    """The notification lines of a golden file; hands out their ids and timestamps in order."""

    lines: list[bytes]
    ids: Iterator[str] = field(init=False)
    stamps: Iterator[int] = field(init=False)

    def __post_init__(self) -> None:
        payloads = [json.loads(line)["value"]["payload"] for line in self.lines]
        # the random ones only: an incremental snapshot's notifications carry the signal's id
        self.ids = iter([p["id"] for p in payloads if _UUID.fullmatch(p["id"])])
        self.stamps = iter([p["timestamp"] for p in payloads])


def recorded(scenario: str) -> Recorded:
    plain = GOLDEN / f"{scenario}.jsonl"  # goldens over 2 MB are stored as .jsonl.gz
    data = plain.read_bytes() if plain.exists() else gzip.decompress((GOLDEN / f"{scenario}.jsonl.gz").read_bytes())
    lines = [line for line in data.splitlines(keepends=True)
             if line.startswith(b'{"topic":"%s"' % TOPIC.encode())]
    return Recorded(lines)


def service(cfg: Configuration, out: list[SourceRecord], golden: Recorded | None = None) -> NotificationService:
    if golden is None:
        return NotificationService(cfg, "dbserver1", out.extend)
    # a notification without a correlation id takes a random id: the recorded one, in order; an
    # incremental one (id = the signal's) must not draw one, so the ids stay aligned
    ids = golden.ids
    stamps = golden.stamps
    return NotificationService(cfg, "dbserver1", out.extend, clock=lambda: next(stamps), new_id=lambda: next(ids))


def lines(records: list[SourceRecord]) -> list[bytes]:
    conv = JsonConverter()
    serializer = RecordSerializer(conv, conv, conv, [("__debezium.context.connectorLogicalName", "dbserver1")])
    return [serializer.line(r) for r in records]


SINK = {"notification.enabled.channels": "sink", "notification.sink.topic.name": TOPIC}


# -- against Debezium's records ------------------------------------------------------------------


def test_initial_snapshot_notifications_match_debezium() -> None:
    # initial_notifications: tables a (2 rows), b (1 row), empty_c (no rows), read in that order
    golden = recorded("initial_notifications")
    out: list[SourceRecord] = []
    svc = service(config(**SINK), out, golden)
    tables = ["public.a", "public.b", "public.empty_c"]
    offset = {"lsn": 26390528}
    svc.initial_started({})
    for table, rows in zip(tables, (2, 1, 0), strict=True):
        svc.initial_table_in_progress(table, tables, offset)
        svc.initial_table_completed(table, rows, tables, offset)
    svc.initial_completed(offset)
    assert lines(out) == golden.lines
    assert all(r.offset == offset for r in out[1:]) and out[0].offset == {}


def test_incremental_snapshot_notifications_match_debezium() -> None:
    # incremental_basic: the initial snapshot of a (3000 rows) and b (300), the signal table captured
    # but not read; then signal sig-basic-1 snapshots a in chunks of 1024 and b (key k1, k2) in one
    golden = recorded("incremental_basic")
    out: list[SourceRecord] = []
    svc = service(config(**{**SINK, "notification.enabled.channels": "sink,log"}), out, golden)
    offset = {"lsn": 1}
    svc.initial_started({})
    for table, rows in (("public.a", 3000), ("public.b", 300)):
        svc.initial_table_in_progress(table, ["public.a", "public.b"], offset)
        svc.initial_table_completed(table, rows, ["public.a", "public.b", "public.debezium_signal"], offset)
    svc.initial_completed(offset)

    ctx = Ctx([Coll("public.a"), Coll("public.b")], "sig-basic-1")
    svc.incremental_started(ctx, offset)
    ctx.maximum_key = (3000,)
    for end in (1024, 2048, 3000):
        ctx.chunk_end = (end,)
        svc.incremental_in_progress(ctx, offset)
    svc.incremental_table_scan_completed(ctx, "public.a", 3000, "SUCCEEDED", offset)
    ctx.collections.pop(0)
    ctx.maximum_key = ctx.chunk_end = (100, "k0")
    svc.incremental_in_progress(ctx, offset)
    svc.incremental_table_scan_completed(ctx, "public.b", 300, "SUCCEEDED", offset)
    ctx.collections.pop(0)
    svc.incremental_completed(ctx, offset)
    assert lines(out) == golden.lines
    assert next(golden.ids, None) is None  # every recorded random id was drawn, none more


# -- the log channel, ids, the no-op service -----------------------------------------------------


def test_log_channel_writes_debeziums_line(caplog: pytest.LogCaptureFixture) -> None:
    out: list[SourceRecord] = []
    svc = NotificationService(config(**{"notification.enabled.channels": "log"}), "dbserver1", out.extend,
                              clock=lambda: 1700000000123, new_id=lambda: "n-1")
    with caplog.at_level(logging.INFO, logger="headwater.engine.signals.notifications"):
        svc.incremental_started(Ctx([Coll("public.a"), Coll("public.b")], "sig-1"), {})
        svc.initial_completed({})
    assert out == []  # no sink
    assert [r.getMessage() for r in caplog.records] == [
        "[Notification Service]  {id='sig-1', aggregateType='Incremental Snapshot', type='STARTED', "
        "additionalData={connector_name=dbserver1, data_collections=public.a,public.b}, timestamp=1700000000123}",
        "[Notification Service]  {id='n-1', aggregateType='Initial Snapshot', type='COMPLETED', "
        "additionalData={connector_name=dbserver1}, timestamp=1700000000123}",
    ]


def test_log_comes_before_the_sink(caplog: pytest.LogCaptureFixture) -> None:
    order: list[str] = []

    class Mark(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            order.append("log")

    handler = Mark()
    logger = logging.getLogger("headwater.engine.signals.notifications")
    logger.addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            svc = NotificationService(config(**{**SINK, "notification.enabled.channels": "sink,log"}), "x",
                                      lambda records: order.append("sink"))
            svc.initial_started({})
    finally:
        logger.removeHandler(handler)
    assert order == ["log", "sink"]


def test_incremental_ids_and_remaining_kinds() -> None:
    out: list[SourceRecord] = []
    counter = itertools.count(1)
    svc = NotificationService(config(**SINK), "srv", out.extend, clock=lambda: 5,
                              new_id=lambda: f"r-{next(counter)}")
    ctx = Ctx([Coll("s.a"), Coll("s.b")], "sig-9")
    svc.incremental_paused(ctx, {"p": 1})
    svc.incremental_resumed(ctx, {"p": 2})
    svc.incremental_aborted(ctx, ["s.b"], {"p": 3})
    ctx.correlation_id = None  # Debezium has unset it when the stop ended the snapshot
    svc.incremental_aborted(ctx, ["s.b", "s.a"], {"p": 4})
    svc.incremental_table_scan_completed(ctx, "s.a", 0, "EMPTY", {"p": 5})
    ctx.chunk_end = (None, "x")
    svc.incremental_in_progress(ctx, {"p": 6})
    svc.initial_skipped({"p": 7})
    svc.initial_table_failed("s.a", {"p": 8})
    svc.initial_aborted({"p": 9})
    got = [(r.key["id"], r.value["id"], r.value["type"], r.value["aggregate_type"],
            list(r.value["additional_data"].items()), r.value["timestamp"], r.offset) for r in out]
    inc, ini = "Incremental Snapshot", "Initial Snapshot"
    name = ("connector_name", "srv")
    assert got == [
        ("sig-9", "sig-9", "PAUSED", inc, [name, ("data_collections", "s.a,s.b")], 5, {"p": 1}),
        ("sig-9", "sig-9", "RESUMED", inc, [name, ("data_collections", "s.a,s.b")], 5, {"p": 2}),
        ("sig-9", "sig-9", "ABORTED", inc, [name, ("data_collections", "s.b")], 5, {"p": 3}),
        ("r-1", "r-1", "ABORTED", inc, [name, ("data_collections", "s.b,s.a")], 5, {"p": 4}),
        ("r-2", "r-2", "TABLE_SCAN_COMPLETED", inc,
         [("scanned_collection", "s.a"), name, ("total_rows_scanned", "0"), ("status", "EMPTY"),
          ("data_collections", "s.a,s.b")], 5, {"p": 5}),
        # no maximum key: Debezium writes it quoted
        ("r-3", "r-3", "IN_PROGRESS", inc,
         [("current_collection_in_progress", "s.a"), name, ("maximum_key", '"<null>"'),
          ("data_collections", "s.a,s.b"), ("last_processed_key", "<null>,x")], 5, {"p": 6}),
        ("r-4", "r-4", "SKIPPED", ini, [name], 5, {"p": 7}),
        # two entries from Map.of: a table of 4 buckets
        ("r-5", "r-5", "TABLE_SCAN_COMPLETED", ini, [name, ("scanned_collection", "s.a"), ("status", "SQL_EXCEPTION")],
         5, {"p": 8}),
        ("r-6", "r-6", "ABORTED", ini, [name], 5, {"p": 9}),
    ]
    assert all(r.topic == TOPIC and not r.context_headers and r.headers == () for r in out)


def test_explicit_correlation_id_of_an_abort() -> None:
    out: list[SourceRecord] = []
    svc = NotificationService(config(**SINK), "srv", out.extend)
    svc.incremental_aborted(Ctx([], None), ["s.a"], {}, correlation_id="sig-3")
    assert out[0].key == {"id": "sig-3"}


def test_disabled_service_does_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def fail(*_: Any) -> Any:
        raise AssertionError("called")

    configs = (config(), config(**{"notification.enabled.channels": "jmx"}))
    for cfg in configs:
        svc = NotificationService(cfg, "srv", fail, clock=fail, new_id=fail)
        assert not svc.enabled
        with caplog.at_level(logging.INFO, logger="headwater.engine.signals.notifications"):
            svc.initial_started({})
            svc.initial_table_in_progress("s.a", ["s.a"], {})
            svc.initial_table_completed("s.a", 1, ["s.a"], {})
            svc.incremental_in_progress(Ctx([Coll("s.a")], "x", (1,), (1,)), {})
            svc.incremental_completed(Ctx([], "x"), {})
        assert [r for r in caplog.records if r.name == "headwater.engine.signals.notifications"] == []


def test_key_values_are_rendered_as_java_does() -> None:
    assert [java_text(v) for v in (None, True, 7, "k0", Decimal("1.25"), Decimal("1E+3"), Decimal("0.00000012"),
                                   1.0, 1e-4, 12345678.9, -0.0, float("nan"), dt.datetime(2024, 1, 1, 0, 1, 0),
                                   dt.datetime(2024, 1, 1, 0, 1, 2, 500000), dt.date(2024, 2, 29),
                                   dt.time(12, 30, 1, 5))] == [
        "<null>", "true", "7", "k0", "1.25", "1E+3", "1.2E-7",
        "1.0", "1.0E-4", "1.23456789E7", "-0.0", "NaN", "2024-01-01 00:01:00.0",
        "2024-01-01 00:01:02.5", "2024-02-29",
        "12:30:01",
    ]


# -- Java's HashMap order, checked against a JVM -------------------------------------------------

_JAVA = """
import java.io.*;
import java.util.*;

public class HashOrder {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", -1);
            List<String> keys = new ArrayList<>(Arrays.asList(parts).subList(1, parts.length));
            if (keys.size() == 1 && keys.get(0).isEmpty()) {
                keys.clear();
            }
            Collection<String> result;
            if (parts[0].equals("M")) { // new HashMap<>(map of the keys), then connector_name put
                Map<String, String> source = new LinkedHashMap<>();
                for (String k : keys) {
                    source.put(k, "v");
                }
                Map<String, String> copy = new HashMap<>(source);
                copy.put("connector_name", "v");
                result = copy.keySet();
            } else {
                result = new HashSet<>(keys);
            }
            System.out.println(String.join("\t", result));
        }
    }
}
"""

_KEYS = ["current_collection_in_progress", "data_collections", "scanned_collection", "total_rows_scanned",
         "status", "maximum_key", "last_processed_key", "chunk_index", "total_chunks"]


def test_hash_order_is_javas(tmp_path: Path) -> None:
    problem = source_launcher_problem()
    if problem is not None:
        pytest.skip(problem)
    rng = random.Random(22)
    cases: list[tuple[str, list[str]]] = []
    for size in range(len(_KEYS) + 1):
        for _ in range(5):
            cases.append(("M", rng.sample(_KEYS, size)))
    for size in (1, 2, 3, 5, 11, 12, 13, 20, 40):
        for _ in range(3):
            cases.append(("S", [f"{rng.choice(['public', 'dbo', 'inventory'])}.t{rng.randrange(10**6)}"
                                for _ in range(size)]))
    source = tmp_path / "HashOrder.java"
    source.write_text(_JAVA, encoding="utf-8")
    stdin = "".join(f"{kind}\t" + "\t".join(keys) + "\n" for kind, keys in cases)
    res = subprocess.run([java_executable(), str(source)], input=stdin, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    java = [line.split("\t") if line else [] for line in res.stdout.splitlines()]
    ours = [java_hash_order([*keys, "connector_name"], _copied_map_capacity(len(keys))) if kind == "M"
            else java_hash_order(keys, _hash_set_capacity(len(keys))) for kind, keys in cases]
    assert ours == java


# -- configuration --------------------------------------------------------------------------------


def test_sink_needs_a_topic() -> None:
    assert problems(**{"notification.enabled.channels": "log,sink"}) == [
        "missing required property 'notification.sink.topic.name': the topic for the notifications must be "
        "provided when the sink notification channel is enabled (notification.enabled.channels)"
    ]
    assert config(**SINK).get("notification.sink.topic.name") == TOPIC


def test_unknown_channels_are_refused() -> None:
    (problem,) = problems(**{"notification.enabled.channels": "sink,Log,my.Channel",
                             "notification.sink.topic.name": TOPIC})
    assert problem.startswith("invalid value 'sink,Log,my.Channel' for property 'notification.enabled.channels': "
                              "unknown notification channel(s) Log, my.Channel")


def test_jmx_and_a_lone_topic_are_warned_about() -> None:
    assert config(**{"notification.enabled.channels": "log,jmx"}).warnings == [
        "notification channel 'jmx' (notification.enabled.channels) has no effect: Headwater has no JMX; use the "
        "sink or log channel"
    ]
    assert config(**{"notification.sink.topic.name": TOPIC}).warnings == [
        "property 'notification.sink.topic.name' is ignored: the sink notification channel is not enabled "
        "(notification.enabled.channels)"
    ]
    assert config(**SINK).warnings == []
