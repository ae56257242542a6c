"""``headwater demo``: a throwaway PostgreSQL with the sample ``inventory`` database, captured live.

Starts a private PostgreSQL 15 cluster, loads the sample data, runs the Headwater engine with the
files sink (one ``<topic>.jsonl`` per topic under ``<workdir>/topics``) and, once the initial
snapshot is done, a generator of random transactions. A live view shows what is captured; Ctrl-C
(or ``--duration``) stops everything and prints a summary.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

log = logging.getLogger("headwater.demo")

DEFAULT_WORKDIR = Path(".headwater") / "demo"
DBNAME = "inventory"
TOPIC_PREFIX = "inventory"
SLOT_NAME = "headwater_demo"
SNAPSHOT_WAIT_S = 10.0  # start the generator after this long even if no snapshot "last" record was seen
REFRESH_PER_SECOND = 4
PLAIN_EVERY_S = 3.0
DRAIN_QUIET_S = 0.75  # after the generator stops: wait until no new events for this long...
DRAIN_MAX_S = 5.0  # ...but at most this long
OPS = ("r", "c", "u", "d")
OP_NAMES = {"r": "read", "c": "create", "u": "update", "d": "delete", "t": "truncate", "m": "message"}


def _expected_topics() -> list[str]:
    from headwater.embedded.sample import SCHEMA, TABLES

    return [f"{TOPIC_PREFIX}.{SCHEMA}.{table}" for table in TABLES]


def _format_key(key: Any) -> str:
    if key is None:
        return "-"
    if isinstance(key, dict):
        payload = key.get("payload") if set(key) == {"schema", "payload"} else key
        if isinstance(payload, dict):
            return ", ".join(f"{k}={v}" for k, v in payload.items())
    return str(key)


class DemoState:
    """What the engine's consumer thread reports (``on_batch``), read by the display thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: dict[str, Counter[str]] = {topic: Counter() for topic in _expected_topics()}
        self.total = 0
        self.recent: deque[tuple[float, str, str, str]] = deque(maxlen=5)
        self.snapshot_done = threading.Event()
        self.commits = 0
        self.last_event_at = time.monotonic()
        self._samples: deque[tuple[float, int]] = deque()

    def on_batch(self, records: list[Any], stats: Any) -> None:
        try:
            self._on_batch(records, stats)
        except Exception:  # never let the display bookkeeping fail the engine
            log.debug("demo bookkeeping failed", exc_info=True)

    def _on_batch(self, records: list[Any], stats: Any) -> None:
        now = time.time()
        last = False
        with self.lock:
            for r in records:
                op = r.op or "other"
                self.ops.setdefault(r.topic, Counter())[op] += 1
                self.recent.append((now, r.topic, op, _format_key(r.key)))
                value = r.value
                if isinstance(value, dict):
                    source = value.get("source")
                    if isinstance(source, dict) and source.get("snapshot") == "last":
                        last = True
            self.total += len(records)
            self.commits = getattr(stats, "commits", self.commits)
            if records:
                self.last_event_at = time.monotonic()
        if last:
            self.snapshot_done.set()

    def snapshot(self) -> tuple[dict[str, Counter[str]], int, list[tuple[float, str, str, str]]]:
        with self.lock:
            return {t: Counter(c) for t, c in self.ops.items()}, self.total, list(self.recent)

    def events_per_second(self, total: int) -> float:
        """Events per second over the last ~3 s (call regularly from the display loop)."""
        now = time.monotonic()
        self._samples.append((now, total))
        while len(self._samples) > 2 and now - self._samples[0][0] > 3.0:
            self._samples.popleft()
        t0, n0 = self._samples[0]
        return (total - n0) / (now - t0) if now - t0 > 0.2 else 0.0


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


class _Signals:
    """SIGINT/SIGTERM set ``stop`` (a second one also sets ``hurry``); restored on ``restore``."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.hurry = threading.Event()
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stop.is_set():
            self.hurry.set()
        self.stop.set()

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            with contextlib.suppress(Exception):
                signal.signal(sig, handler)
        self._previous.clear()


class _StockReader:
    """Reads ``inventory.products_on_hand`` (with product names) at most twice a second."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.conn: Any = None
        self.rows: list[tuple[int, str, int]] = []
        self.error: str | None = None
        self._read_at = 0.0

    def read(self) -> list[tuple[int, str, int]]:
        now = time.monotonic()
        if now - self._read_at < 0.5:
            return self.rows
        self._read_at = now
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self.cluster.connect(DBNAME)
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


class _View:
    def __init__(self, state: DemoState, stock: _StockReader, cluster: Any, topics_dir: Path,
                 duration: float | None) -> None:
        self.state = state
        self.stock = stock
        self.cluster = cluster
        self.topics_dir = topics_dir
        self.duration = duration
        self.generator: Any = None
        self.started = time.monotonic()
        self.rate = 0.0

    def phase(self) -> str:
        if self.generator is None:
            return "initial snapshot"
        if self.generator.running:
            return "streaming changes"
        return "stopping"

    def render(self) -> Group:
        ops, total, recent = self.state.snapshot()
        self.rate = self.state.events_per_second(total)
        elapsed = time.monotonic() - self.started
        limit = ""
        if self.duration is not None:
            elapsed = min(elapsed, self.duration)
            limit = f" of {self.duration:.0f}s"
        header = Text.assemble(
            ("Headwater demo", "bold cyan"),
            f"  PostgreSQL {self.cluster.host}:{self.cluster.port}/{DBNAME} → {self.topics_dir}\n",
            (f"{self.phase()}", "bold"),
            f"  ·  {elapsed:.0f}s{limit}  ·  {total} events  ·  {self.rate:.1f} events/s  ·  Ctrl-C to stop",
        )

        topics = Table(title="Change events per topic", title_justify="left", expand=False)
        topics.add_column("topic")
        for op in OPS:
            topics.add_column(op, justify="right", header_style="bold")
        topics.add_column("total", justify="right")
        sums: Counter[str] = Counter()
        for topic in sorted(ops):
            counts = ops[topic]
            sums.update(counts)
            topics.add_row(topic, *(str(counts.get(op, 0)) for op in OPS), str(sum(counts.values())))
        topics.add_section()
        topics.add_row(Text("all", style="bold"), *(str(sums.get(op, 0)) for op in OPS), str(sum(sums.values())))

        events = Table(title="Latest events", title_justify="left")
        events.add_column("time")
        events.add_column("topic")
        events.add_column("op")
        events.add_column("key")
        for ts, topic, op, key in reversed(recent):
            events.add_row(time.strftime("%H:%M:%S", time.localtime(ts)), topic, op, key)

        gen = Table(title="Generated transactions", title_justify="left")
        gen.add_column("kind")
        gen.add_column("count", justify="right")
        if self.generator is None:
            gen.add_row("(waiting for the snapshot)", "")
        else:
            for kind, count in dict(self.generator.counts).items():
                gen.add_row(kind.replace("_", " "), str(count))

        rows = self.stock.read()
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
        if self.stock.error:
            stock.caption = f"(could not read: {self.stock.error})"

        top = Table.grid(padding=(0, 2))
        top.add_row(topics, gen)
        return Group(Panel(header), top, events, stock)

    def plain_line(self) -> str:
        ops, total, _ = self.state.snapshot()
        self.rate = self.state.events_per_second(total)
        sums: Counter[str] = Counter()
        for counts in ops.values():
            sums.update(counts)
        by_op = " ".join(f"{op}={sums.get(op, 0)}" for op in OPS)
        gen = "" if self.generator is None else f"; generated {self.generator.counts.get('transactions', 0)} tx"
        elapsed = time.monotonic() - self.started
        return f"[{elapsed:5.1f}s] {self.phase()}: {total} events ({by_op}), {self.rate:.1f}/s{gen}"


@contextlib.contextmanager
def _logging_through(stream: Any):
    """Point the root logger's console handlers at ``stream`` (rich's proxy) while Live is showing."""
    changed = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
            if handler.stream in (sys.__stderr__, sys.__stdout__):
                changed.append((handler, handler.setStream(stream)))
    try:
        yield
    finally:
        for handler, previous in changed:
            handler.setStream(previous)


def _prepare_workdir(workdir: Path) -> tuple[Path, Path]:
    """``<workdir>/topics`` and ``<workdir>/offsets.json``, emptied of a previous demo's output."""
    topics_dir = workdir / "topics"
    offsets = workdir / "offsets.json"
    topics_dir.mkdir(parents=True, exist_ok=True)
    offsets.unlink(missing_ok=True)  # a new cluster: offsets of an earlier one would skip the snapshot
    for f in topics_dir.glob("*.jsonl"):
        f.unlink()
    return topics_dir, offsets


def demo_config(cluster: Any, topics_dir: Path, offsets: Path) -> Any:
    from headwater import config as cfg

    return cfg.from_properties(
        {
            "name": "headwater-demo",
            "connector.class": "postgresql",
            "database.hostname": cluster.host,
            "database.port": cluster.port,
            "database.user": cluster.user,
            "database.dbname": DBNAME,
            "topic.prefix": TOPIC_PREFIX,
            "schema.include.list": "inventory",
            "slot.name": SLOT_NAME,
            "offset.storage.file.filename": str(offsets),
            "offset.flush.interval.ms": 1000,
            "provide.transaction.metadata": False,
        },
        sink_type="files",
        sink={"directory": str(topics_dir)},
    )


def _summary(console: Console, state: DemoState, generator: Any, topics_dir: Path, offsets: Path,
             elapsed: float) -> None:
    ops, total, _ = state.snapshot()
    table = Table(title=f"Captured {total} change events in {elapsed:.0f}s", title_justify="left")
    table.add_column("topic")
    for op in OPS:
        table.add_column(op, justify="right")
    table.add_column("total", justify="right")
    for topic in sorted(ops):
        counts = ops[topic]
        table.add_row(topic, *(str(counts.get(op, 0)) for op in OPS), str(sum(counts.values())))
    console.print(table)
    if generator is not None:
        counts = dict(generator.counts)
        done = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items() if k != "transactions" and v)
        console.print(f"Generated {counts.get('transactions', 0)} transactions ({done or 'none'}).")
    console.print(f"Change events (one JSON line each, Debezium's format): {topics_dir}/<topic>.jsonl")
    console.print(f"Offsets: {offsets}")
    console.print(f"Try: head -n 1 {topics_dir}/{TOPIC_PREFIX}.inventory.customers.jsonl | python -m json.tool")


def run_demo(duration: float | None = None, rate: float = 20.0, workdir: str | Path | None = None) -> int:
    """Run the demo; ``duration`` None = until Ctrl-C. Returns the exit code (0 ok, 1 failure)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 120))  # CI logs: no wrapping of topic names
    err = Console(stderr=True, soft_wrap=True)
    if duration is not None and duration <= 0:
        err.print("headwater demo: --duration must be positive")
        return 1
    if rate <= 0:
        err.print("headwater demo: --rate must be positive")
        return 1
    workdir = Path(workdir) if workdir is not None else DEFAULT_WORKDIR
    workdir = workdir.resolve()
    signals = _Signals()
    signals.install()
    cluster: Any = None
    generator: Any = None
    engine_thread: _EngineThread | None = None
    engine_stop = threading.Event()
    stock: _StockReader | None = None
    try:
        from headwater.embedded.postgres import PostgresNotFoundError, ThrowawayPostgres
        from headwater.embedded.sample import ChangeGenerator, create_sample_database
        from headwater.standalone import build_engine

        topics_dir, offsets = _prepare_workdir(workdir)
        console.print("Starting a throwaway PostgreSQL 15 cluster (wal_level=logical)…")
        try:
            cluster = ThrowawayPostgres()
        except PostgresNotFoundError as exc:
            err.print(f"headwater demo: {exc}", markup=False, highlight=False)
            return 1
        cluster.start()
        if signals.stop.is_set():
            raise KeyboardInterrupt
        cluster.create_database(DBNAME)
        conn = cluster.connect(DBNAME)
        try:
            create_sample_database(conn)
        finally:
            conn.close()
        console.print(f"Created the sample database {DBNAME!r} on {cluster.host}:{cluster.port}; "
                      f"writing change events to {topics_dir}")

        state = DemoState()
        engine = build_engine(demo_config(cluster, topics_dir, offsets), on_batch=state.on_batch)
        engine_thread = _EngineThread(engine, engine_stop)
        engine_thread.start()
        stock = _StockReader(cluster)
        view = _View(state, stock, cluster, topics_dir, duration)
        started = view.started
        deadline = None if duration is None else started + duration

        def tick() -> bool:
            """Start the generator when it is time; False when the demo should end."""
            nonlocal generator
            if not engine_thread.is_alive():
                return False
            if generator is None and (state.snapshot_done.is_set() or time.monotonic() - started >= SNAPSHOT_WAIT_S):
                generator = ChangeGenerator(cluster.dsn(DBNAME), rate=rate).start()
                view.generator = generator
            return not signals.stop.is_set() and (deadline is None or time.monotonic() < deadline)

        if console.is_terminal:
            with Live(view.render(), console=console, refresh_per_second=REFRESH_PER_SECOND,
                      transient=True) as live, _logging_through(sys.stderr):
                while tick():
                    live.update(view.render())
                    signals.stop.wait(1 / REFRESH_PER_SECOND)
                if generator is not None:
                    generator.stop()
                _drain(state, signals, engine_thread)
                live.update(view.render())
        else:
            next_line = started
            while tick():
                if time.monotonic() >= next_line:
                    print(view.plain_line(), flush=True)
                    next_line += PLAIN_EVERY_S
                signals.stop.wait(0.25)
            if generator is not None:
                generator.stop()
            _drain(state, signals, engine_thread)
            print(view.plain_line(), flush=True)

        elapsed = time.monotonic() - started
        engine_stop.set()
        engine_thread.join(60)
        if engine_thread.is_alive():
            raise RuntimeError("the engine did not stop within 60 s")
        if engine_thread.error is not None:
            raise engine_thread.error
        if generator is not None and generator.last_error and not generator.counts.get("transactions"):
            raise RuntimeError(f"the change generator failed: {generator.last_error}")
        _summary(console, state, generator, topics_dir, offsets, elapsed)
        return 0
    except KeyboardInterrupt:
        err.print("headwater demo: interrupted")
        return 1
    except Exception as exc:
        message = str(exc).strip() or repr(exc)
        err.print(f"headwater demo failed: {type(exc).__name__}: {message}", markup=False, highlight=False)
        log.debug("demo failure", exc_info=True)
        return 1
    finally:
        if generator is not None:
            with contextlib.suppress(Exception):
                generator.stop()
        engine_stop.set()
        if engine_thread is not None and engine_thread.is_alive():
            engine_thread.join(60)
        if stock is not None:
            stock.close()
        if cluster is not None:
            try:
                cluster.stop()
            except Exception as exc:
                err.print(f"headwater demo: could not stop the PostgreSQL cluster: {exc}", markup=False)
        signals.restore()


def _drain(state: DemoState, signals: _Signals, engine_thread: _EngineThread) -> None:
    """Give the engine a moment to capture the generator's last transactions (skipped on a second Ctrl-C)."""
    end = time.monotonic() + DRAIN_MAX_S
    while time.monotonic() < end and engine_thread.is_alive() and not signals.hurry.is_set():
        if time.monotonic() - state.last_event_at >= DRAIN_QUIET_S:
            return
        time.sleep(0.05)
