"""The demo's standalone back-end: the Headwater engine (no Spark) with the files sink, one
``<topic>.jsonl`` per topic under ``<workdir>/topics``; the view adds the latest events and the
stock table as PostgreSQL has it."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

from rich.table import Table

from headwater.cli.demo.backend import DemoBackend, sample_topic
from headwater.cli.demo.progress import CaptureProgress
from headwater.cli.demo.view import ops_table

log = logging.getLogger("headwater.demo")

ENGINE_STOP_S = 60.0
STOCK_EVERY_S = 0.5


def _format_key(key: Any) -> str:
    if key is None:
        return "-"
    if isinstance(key, dict):
        payload = key.get("payload") if set(key) == {"schema", "payload"} else key
        if isinstance(payload, dict):
            return ", ".join(f"{k}={v}" for k, v in payload.items())
    return str(key)


def _is_snapshot_last(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    source = value.get("source")
    return isinstance(source, dict) and source.get("snapshot") == "last"


class _EngineThread(threading.Thread):
    def __init__(self, engine: Any, stop: threading.Event) -> None:
        super().__init__(name="headwater-demo-engine", daemon=True)
        self.engine = engine
        self.stop_event = stop
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.engine.run(self.stop_event)
        except BaseException as exc:
            self.error = exc


class _StockReader:
    """Reads ``inventory.products_on_hand`` (with product names) from PostgreSQL, at most every
    :data:`STOCK_EVERY_S`."""

    def __init__(self, cluster: Any, dbname: str) -> None:
        self.cluster = cluster
        self.dbname = dbname
        self.conn: Any = None
        self.rows: list[tuple[int, str, int]] = []
        self.error: str | None = None
        self._read_at = 0.0

    def read(self) -> list[tuple[int, str, int]]:
        now = time.monotonic()
        if now - self._read_at < STOCK_EVERY_S:
            return self.rows
        self._read_at = now
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self.cluster.connect(self.dbname)
            with self.conn.cursor() as cur:
                cur.execute(
                    "SELECT h.product_id, p.name, h.quantity FROM inventory.products_on_hand h "
                    "JOIN inventory.products p ON p.id = h.product_id ORDER BY h.product_id"
                )
                self.rows = cur.fetchall()
            self.error = None
        except Exception as exc:
            self.error = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            self.close()
        return self.rows

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


class StandaloneBackend(DemoBackend):
    """``headwater demo --standalone``: the standalone runner's engine on a thread of its own."""

    title = "PostgreSQL → standalone runner → JSONL files"
    outputs = ("topics", "offsets.json")
    catch_up_quiet_s = 0.75
    catch_up_max_s = 5.0

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: _EngineThread | None = None
        self._stock: _StockReader | None = None
        self._progress: CaptureProgress | None = None
        self._recent_lock = threading.Lock()
        self._recent: deque[tuple[float, str, str, str]] = deque(maxlen=5)  # (time, topic, op, key)

    def destination(self, workdir: Path) -> str:
        return str(workdir / "topics")

    def starting(self, workdir: Path) -> str:
        return f"writing change events to {self.destination(workdir)}"

    def _config(self, source: dict[str, str], workdir: Path) -> Any:
        from headwater import config as cfg

        return cfg.from_properties(
            {
                "name": "headwater-demo",
                **source,
                "offset.storage.file.filename": str(workdir / "offsets.json"),
                "offset.flush.interval.ms": "1000",
                "provide.transaction.metadata": "false",
            },
            sink_type="files",
            sink={"directory": str(workdir / "topics")},
        )

    def start(self, cluster: Any, source: dict[str, str], progress: CaptureProgress, workdir: Path) -> None:
        from headwater.standalone import build_engine

        self._progress = progress
        engine = build_engine(self._config(source, workdir), on_batch=self._on_batch)
        self._thread = _EngineThread(engine, self._stop)
        self._thread.start()
        self._stock = _StockReader(cluster, source["database.dbname"])

    def _on_batch(self, records: list[Any], _stats: Any) -> None:
        """The engine's consumer thread reports each batch here."""
        if self._progress is None:
            return
        try:
            now = time.time()
            counts = Counter((r.topic, r.op or "other") for r in records)
            with self._recent_lock:
                self._recent.extend((now, r.topic, r.op or "other", _format_key(r.key)) for r in records[-5:])
            last = any(_is_snapshot_last(r.value) for r in records)
            self._progress.add(((topic, op, n) for (topic, op), n in counts.items()), snapshot_last=last)
        except Exception:  # never let the display bookkeeping fail the engine
            log.debug("demo bookkeeping failed", exc_info=True)

    def check(self) -> None:
        if self._thread is None or self._thread.is_alive():
            return
        if self._thread.error is not None:
            raise self._thread.error
        raise RuntimeError("the engine stopped by itself")

    def panels(self) -> list[Any]:
        events = Table(title="Latest events", title_justify="left")
        events.add_column("time")
        events.add_column("topic")
        events.add_column("op")
        events.add_column("key")
        with self._recent_lock:
            recent = list(self._recent)
        for ts, topic, op, key in reversed(recent):
            events.add_row(time.strftime("%H:%M:%S", time.localtime(ts)), topic, op, key)
        return [events, self._stock_table()]

    def _stock_table(self) -> Table:
        rows = self._stock.read() if self._stock is not None else []
        per_column = 5
        groups = max(1, -(-len(rows) // per_column))
        stock = Table(title="inventory.products_on_hand (live from the database)", title_justify="left")
        for _ in range(groups):
            stock.add_column("id", justify="right", style="dim")
            stock.add_column("product")
            stock.add_column("qty", justify="right")
        for i in range(per_column):
            cells: list[str] = []
            for g in range(groups):
                j = g * per_column + i
                cells += [str(rows[j][0]), str(rows[j][1])[:16], str(rows[j][2])] if j < len(rows) else ["", "", ""]
            stock.add_row(*cells)
        if self._stock is not None and self._stock.error:
            stock.caption = f"(could not read: {self._stock.error})"
        return stock

    def stop(self) -> None:
        self._stop.set()
        if self._thread is None:
            return
        self._thread.join(ENGINE_STOP_S)
        if self._thread.is_alive():
            raise RuntimeError(f"the engine did not stop within {ENGINE_STOP_S:.0f} s")
        if self._thread.error is not None:
            raise self._thread.error

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(ENGINE_STOP_S)
        if self._stock is not None:
            self._stock.close()

    def summary(self, progress: CaptureProgress, elapsed: float) -> Table:
        ops, total = progress.counts()
        return ops_table(f"Captured {total} change events in {elapsed:.0f}s", ops)

    def notes(self, workdir: Path) -> list[str]:
        topics = workdir / "topics"
        return [
            f"Change events (one JSON line each, Debezium's format): {topics}/<topic>.jsonl",
            f"Offsets: {workdir / 'offsets.json'}",
            f"Try: head -n 1 {topics}/{sample_topic('customers')}.jsonl | python -m json.tool",
        ]
