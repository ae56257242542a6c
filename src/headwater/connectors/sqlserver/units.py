"""SQL Server's units of work for the Spark source, driver side: snapshot chunks and streaming
windows, and the reader that plans the windows (:class:`SqlServerUnitStream`).

**Consistency of a snapshot read by many connections.** SQL Server has no exported snapshot that
other connections could join, so each executor reads its chunk on its own connection, in its own
transaction (the configured `snapshot.isolation.mode`'s level, without table locks: a lock taken
by one connection cannot cover another's reads). What makes the result consistent is the order of
the steps: every database's maximum LSN is taken (and its tables' structure recorded) before any
chunk is read, and streaming starts right after that LSN. Every change committed after it is
streamed; a chunk read later may already hold some of those changes (or miss a row deleted
since), but each snapshot record sorts before every streamed record of its database, so applying
the events in position order — what the Delta sink does, key by key — ends in the source's state:
the last change of a key wins over the snapshot's version of it, and a key no change touched
after the maximum LSN is read as it was then. These are Debezium's `read_committed` semantics
(spec §1.2), whatever the isolation mode.

**Streaming.** The driver runs the connector's streaming loop (:class:`~headwater.connectors.
sqlserver.streaming.Streamer`) without its merge: per database iteration it decides the window
(`max.iteration.transactions`), the capture instances to read and their stop LSNs, and the schema
changes (a new table's CREATE, a capture-instance switch's ALTER, recorded in the schema history
on the driver); executors read the change tables of the window and merge and decode them with the
same code as the standalone runner (:mod:`work`). A window is cut where a new capture instance
starts, so the ALTER comes out between the changes before and after it, as standalone.

**Transaction metadata.** Debezium keeps one transaction context per database and sends a
transaction's END only when the database's next transaction begins, or when the capture job has
idled (the loop's end-of-transaction timer). A window's executor therefore starts from the
database's last transaction before the window, if its END is still pending (`tx_floor`), counted
from the change tables, and sends that END before the window's first transaction; the idle END
is a unit of its own, planned by the driver's loop under the standalone loop's condition. The
offset carries the floor (:data:`TX_ENDED`) while an END may be pending, so after a restart the
first window sends the END of the transaction the previous run left open, before the next
transaction's BEGIN (or the idle unit does), as the standalone runner does from Debezium's
`transaction_id` keys. The driver does not read the changes, so the offset names no transaction
and no counts: the executor finds them in the change tables, as for every window. A batch that
ended with an idle END and is replayed after a restart gets that END again (its end offset says
so: same commit, event serial number 1), even when the restarted loop has windows past it.

**Offsets.** The connector's offset holds one entry per database. After a window the entry says
its last commit LSN and, as change LSN, ``ffffffff:ffffffff:ffff``: the whole commit is done (a
restart re-reads from that commit and skips every change at it). Windows end at commits, so a
window can be cut at any commit LSN (a replayed batch ends where its first run ended).
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from headwater.connectors.sqlserver import metadata as md
from headwater.connectors.sqlserver.changes import skipped_codes
from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.lsn import LSN_BYTES, ZERO, lsn_to_str, position_key
from headwater.connectors.sqlserver.source_info import DatabaseOffset, make_offset, parse_offset
from headwater.connectors.sqlserver.streaming import Streamer
from headwater.engine.connector import ConnectorError
from headwater.engine.read_ahead import UnitQueue
from headwater.engine.source import Offset, UnitStream

if TYPE_CHECKING:
    from headwater.connectors.sqlserver.capture import SqlServerCaptureSource
    from headwater.engine.records import SourceRecord
    from headwater.engine.snapshot_plan import SnapshotChunk
    from headwater.relational.table import Table, TableId

log = logging.getLogger(__name__)

# the change LSN of an offset whose commit is complete: above every real change LSN
COMPLETE = b"\xff" * LSN_BYTES
_UNIT_BYTES = 1024   # what a window costs the read-ahead (its rows are read by the executor)
WINDOW_WEIGHT = 64   # a window's weight in the grouping of units into tasks
_SNAPSHOT_COMMIT = "0" * 20
# an offset entry's key with transaction metadata: every transaction of the database committed at or
# before this LSN has had its END; the last one after it (up to the entry's commit LSN) may be open.
# Only written while it is below the commit LSN; an entry without it (or a checkpoint written before
# it existed) has every transaction up to its commit LSN ended.
TX_ENDED = "transaction_ended_lsn"


# -- positions ---------------------------------------------------------------------------------------

def change_position(db_index: int, commit: bytes | None, change: bytes | None, serial: int, n: int) -> str:
    """A streamed record's position: the database's index, (commit LSN, change LSN, event serial
    number) of its change, and the record's number among those of that change (BEGIN, END of the
    transaction before, the change, its tombstone; schema changes after the change they follow)."""
    return f"{db_index:04x}{position_key(commit, change, serial)}{n:02x}"


def snapshot_position(db_index: int, table_index: int, chunk_index: int, row: int) -> str:
    """A snapshot row's position: commit LSN zero (before every streamed record of the database),
    then table, chunk and row (table numbers from 1: 0 is the database's schema changes)."""
    return f"{db_index:04x}{_SNAPSHOT_COMMIT}{table_index + 1:08x}{chunk_index:012x}{row:08x}00"


def schema_position(db_index: int, n: int) -> str:
    """The position of a snapshot's n-th schema-change record of a database (before its rows)."""
    return f"{db_index:04x}{_SNAPSHOT_COMMIT}{0:020x}{n:08x}00"


def complete(commit: bytes) -> DatabaseOffset:
    """The offset entry of a database whose changes up to and including `commit` were handed over."""
    return DatabaseOffset(commit_lsn=commit, change_lsn=COMPLETE, event_serial_no=0)


def previous_lsn(lsn: bytes) -> bytes:
    return (int.from_bytes(lsn, "big") - 1).to_bytes(LSN_BYTES, "big")


def next_lsn(lsn: bytes) -> bytes:
    return (int.from_bytes(lsn, "big") + 1).to_bytes(LSN_BYTES, "big")


def _key_part(part: str) -> tuple[bytes, bytes, int]:
    """One database's part of :func:`~headwater.connectors.sqlserver.source_info.offset_sort_key`."""
    return bytes.fromhex(part[:20]), bytes.fromhex(part[20:40]), int(part[40:], 16)


# -- units ---------------------------------------------------------------------------------------------

@dataclass
class SnapshotUnit:
    """One chunk of one table's snapshot, read on an executor's own connection."""

    database: str
    db_index: int
    chunk: SnapshotChunk
    table: Table | None              # the table as its events are built (None: not captured, no rows)
    lsn: bytes | None                # the database's snapshot LSN (source.commit_lsn of the rows)
    first_table: bool                # the plan's markers: the database's first table / last table with
    last_table: bool                 # rows (per database, as Debezium's per-partition snapshots set them)
    isolation: str                   # the level the chunk is read at
    fetch_size: int
    records: list[tuple[str, SourceRecord]] = field(default_factory=list)  # schema changes before the rows


@dataclass
class StreamWindow:
    """One database's changes with `from_lsn <= commit LSN <= to_lsn` (one iteration of the
    streaming loop, or a part of one cut where a capture instance starts)."""

    database: str
    db_index: int
    from_lsn: bytes | None           # None: from each capture instance's start
    to_lsn: bytes
    start: DatabaseOffset            # the position before the window (changes at or before it are skipped)
    instances: list[md.ChangeTable]  # with .table (the columns queried) and .stop_lsn
    entries: dict[TableId, Table]    # source table -> the table its events are built with
    records: list[tuple[str, SourceRecord]] = field(default_factory=list)  # before the changes
    # transaction metadata (None: not provided): the database's transactions after this commit LSN
    # were streamed (in this run, or before a restart: the offset's TX_ENDED) and not ended yet —
    # the last of them before the window is still open (its END comes when the window's first
    # transaction begins, as Debezium keeps one transaction context per database)
    tx_floor: bytes | None = None
    end_tx: bytes | None = None      # no changes: the END of this transaction (the idle timer's)
    # no changes: the END of the database's last transaction up to `to_lsn`, if after `tx_floor`
    # (the idle END a replayed batch ended with, see SqlServerUnitStream.split)
    end_open: bool = False

    def cut(self, commit: bytes) -> tuple[StreamWindow | None, StreamWindow | None]:
        """(the changes up to and including `commit`, the rest)."""
        if commit >= self.to_lsn:
            return self, None
        if self.from_lsn is not None and commit < self.from_lsn:
            return None, replace(self, records=list(self.records))
        head = replace(self, to_lsn=commit)
        tail = replace(self, from_lsn=next_lsn(commit), start=complete(commit), records=[])
        return head, tail


@dataclass
class StreamUnit:
    """Windows of the streaming loop for one task, in order; `records` come before them."""

    windows: list[StreamWindow] = field(default_factory=list)
    records: list[tuple[str, SourceRecord]] = field(default_factory=list)
    before: Offset = field(default_factory=dict)   # the offset the unit starts at

    @property
    def size(self) -> int:
        """What the Spark source groups units into tasks by (its streamTaskMessages): the driver does
        not know a window's rows, so each counts as WINDOW_WEIGHT (about a thousand windows a task)."""
        return WINDOW_WEIGHT * len(self.windows) + len(self.records)

    @property
    def nbytes(self) -> int:
        return _UNIT_BYTES * (len(self.windows) + 1)


# -- the driver's loop -------------------------------------------------------------------------------

@dataclass
class _Progress:
    """What the driver knows of one database's stream: where the run started, the last window of
    each finished iteration (for the position schema changes say, see `_settle`)."""

    base: DatabaseOffset
    handed: DatabaseOffset                       # the position after the last window handed over
    last_iteration: tuple[bytes | None, bytes] | None = None
    current: tuple[bytes | None, bytes] | None = None
    split: tuple[bytes, bytes] | None = None     # planning: a capture instance starting in the window
    quiet_at: float = 0.0                        # when an iteration that found nothing new began
    tx_floor: bytes | None = None                # transaction metadata: see StreamWindow.tx_floor
    window_at: float = 0.0                       # when the last window was planned (the idle timer)


class _PlanningStreamer(Streamer):
    """The streaming loop on the driver: an iteration's merge becomes a window for the executors;
    no heartbeat records (the Spark source emits none)."""

    owner: SqlServerUnitStream

    def _merge(self, state: Any, from_lsn: bytes | None, to_lsn: bytes, stop: threading.Event) -> bool:
        self.owner.plan_iteration(state, from_lsn, to_lsn, stop)
        return True

    def iterate(self, state: Any, stop: threading.Event) -> bool:
        began = time.monotonic()
        found = super().iterate(state, stop)
        if not found:
            self.owner.progress[state.database].quiet_at = began
        return found

    def _heartbeat(self, state: Any, *, force: bool = False) -> None:
        pass

    def _end_transaction_if_idle(self, state: Any) -> None:
        """The standalone loop's idle END (Debezium's endTransaction), planned as a unit of its own:
        the executors read no window it could go with."""
        if self.settings.provide_transaction_metadata:
            self.owner.end_if_idle(state, self.end_delay_s)

    def _schema_event(self, state: Any, kind: str, table: Any, ts_us: int) -> Any:
        self.owner.settle(state)
        return super()._schema_event(state, kind, table, ts_us)


class SqlServerUnitStream(UnitStream):
    """Streaming windows as units, planned ahead on a background thread."""

    def __init__(self, source: SqlServerCaptureSource, start: Offset, read_ahead: int,
                 deferred: list[SourceRecord]) -> None:
        c = source.connector
        self.source = source
        self.databases = list(source.databases)
        self.index = {db: i for i, db in enumerate(self.databases)}
        entries = parse_offset(start, self.databases)
        for db in self.databases:
            entries.setdefault(db, DatabaseOffset())
        ended = {db: e.extra.pop(TX_ENDED, None) for db, e in entries.items()}
        self.progress = {db: _Progress(e.copy(), e.copy()) for db, e in entries.items()}
        self._tx = bool(c.config.get("provide.transaction.metadata"))
        for db, p in self.progress.items():
            if not self._tx:
                continue
            at = p.base.commit_lsn or ZERO
            floor = _lsn(ended[db]) if isinstance(ended[db], str) else at
            p.tx_floor = min(floor, at)
            if p.tx_floor < at:  # an END may be pending: the idle timer runs from the start (as standalone's)
                p.window_at = time.monotonic()
        self.units = UnitQueue(read_ahead)
        self._pushback: collections.deque[tuple[StreamUnit, Offset]] = collections.deque()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._skipped = skipped_codes(sorted(c.skipped_operations))
        # its own connections: the feed's thread queries the source's (current_position) meanwhile
        conns = {db: SqlServerConnection(source.config, db, purpose="headwater-stream") for db in self.databases}
        self.conns = conns
        settings = c.stream_settings(self.databases)
        interval = md.capture_polling_interval(conns[self.databases[0]]) if self._tx and self.databases else 5.0
        streamer = _PlanningStreamer(settings, source.schema, conns, {db: e.copy() for db, e in entries.items()},
                                     lambda batch: None, c.dispatcher, make_offset,
                                     capture_polling_interval_s=interval)
        streamer.owner = self
        streamer.schema_filter = c.table_filter  # type: ignore[assignment]
        self.streamer = streamer
        if deferred:  # schema changes of the snapshot not yet delivered (databases without rows, no_data)
            records = []
            counts: dict[int, int] = collections.Counter()
            for record in deferred:
                db_index = self.index.get(_record_database(record) or "", 0)
                records.append((schema_position(db_index, counts[db_index]), record))
                counts[db_index] += 1
            self.units.put(StreamUnit(records=records, before=self.offset()), self.offset(), 0, _UNIT_BYTES,
                           timeout=0)
        self._thread = threading.Thread(target=self._run, name="headwater-sqlserver-feed", daemon=True)

    def offset(self) -> Offset:
        entries = {}
        for db in self.databases:
            p = self.progress[db]
            entry = p.handed
            if p.tx_floor is not None and entry.commit_lsn is not None and p.tx_floor < entry.commit_lsn:
                entry = entry.copy()
                entry.extra[TX_ENDED] = lsn_to_str(p.tx_floor)
            entries[db] = entry
        return make_offset(entries)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.streamer.run(self._stop)
        except BaseException as exc:  # handed to the caller of get()/check()
            self._failure = exc

    # -- planning (reader thread) ----------------------------------------------------------------

    def plan_iteration(self, state: Any, from_lsn: bytes | None, to_lsn: bytes, stop: threading.Event) -> None:
        """One iteration's window(s), cut where a capture instance of the window starts (its ALTER
        between them), handed over as one unit."""
        db = state.database
        progress = self.progress[db]
        progress.current = (from_lsn, to_lsn)
        streamer = self.streamer
        # a capture instance disabled since: not read any more (standalone finds out when its query
        # fails and reads the window again without it)
        live = {ct.capture_instance for ct in md.change_tables(state.conn, db, to_lsn)}
        for ct in list(state.tables or ()):
            if ct.capture_instance not in live:
                log.info("Table is no longer captured with capture instance %s", ct.capture_instance)
                state.tables.remove(ct)
        windows: list[StreamWindow] = []
        low = from_lsn
        start = progress.handed
        for cp in sorted([c for c in state.checkpoints if c.start_lsn is not None and c.start_lsn <= to_lsn],
                         key=lambda c: c.start_lsn):
            s = cp.start_lsn
            if low is None or s > low:
                windows.append(self._window(state, low, previous_lsn(s), start))
                start = complete(previous_lsn(s))
                low = s
            state.checkpoints.remove(cp)
            progress.split = (s, to_lsn)
            streamer._migrate(state, cp)
            progress.split = None
        windows.append(self._window(state, low, to_lsn, start))
        progress.last_iteration, progress.current = (from_lsn, to_lsn), None
        before = self.offset()
        progress.handed = complete(to_lsn)
        progress.window_at = time.monotonic()
        self._put(StreamUnit(windows=windows, before=before), stop)

    def _put(self, unit: StreamUnit, stop: threading.Event | None = None) -> None:
        after = self.offset()
        while stop is None or not stop.is_set():
            try:
                self.units.put(unit, after, 1, _UNIT_BYTES, timeout=1.0)
                return
            except queue.Full:
                if stop is None and self._stop.is_set():
                    return
                continue

    def end_if_idle(self, state: Any, delay_s: float) -> None:
        """The END of the database's open transaction once the loop has found nothing new for
        `delay_s` and the capture job's last scan was empty (the standalone loop's condition)."""
        db = state.database
        progress = self.progress[db]
        floor = progress.tx_floor
        handed = progress.handed.commit_lsn
        if floor is None or handed is None or handed <= floor or not progress.window_at:
            return
        if time.monotonic() - progress.window_at < delay_s or not self.streamer.transaction_ended(state):
            return
        last = self._last_commit(state, handed)
        if last is None or last <= floor:
            progress.tx_floor = handed
            return
        before = self.offset()
        end = self._window(state, None, handed, progress.handed)
        end.end_tx, end.tx_floor = last, None
        progress.tx_floor = handed   # in the unit's end offset, not in its start
        # the unit must move the offset (a batch ends only past its start): same commit, next serial
        progress.handed = DatabaseOffset(commit_lsn=handed, change_lsn=COMPLETE, event_serial_no=1)
        self._put(StreamUnit(windows=[end], before=before))

    def _last_commit(self, state: Any, upto: bytes) -> bytes | None:
        """The commit LSN of the database's last captured change at or before `upto`."""
        best: bytes | None = None
        for ct in state.tables or ():
            where, params = self._filters(ct)
            value = state.conn.query_one(
                f"SELECT MAX([__$start_lsn]) FROM {self._change_table(state.database, ct)} WHERE "
                f"[__$start_lsn] <= ?{where}", (upto, *params),
                what=f"reading capture instance {ct.capture_instance!r}")
            if value is not None and (best is None or bytes(value) > best):
                best = bytes(value)
        return best

    def _window(self, state: Any, low: bytes | None, high: bytes, start: DatabaseOffset) -> StreamWindow:
        streamer = self.streamer
        db = state.database
        pending = streamer._pending[:]
        streamer._pending.clear()
        instances = [replace(ct) for ct in state.tables or () if ct.table is not None]
        entries = {}
        for ct in instances:
            entry = streamer.schema.table_for(ct.source)
            if entry is not None:
                entries[ct.source] = entry.table
        at = state.offset
        records = [(change_position(self.index[db], at.commit_lsn, at.change_lsn, at.event_serial_no, 0xF0 + i), r)
                   for i, r in enumerate(pending)]
        return StreamWindow(db, self.index[db], low, high, start.copy(), instances, entries, records,
                            tx_floor=self.progress[db].tx_floor)

    def settle(self, state: Any) -> None:
        """Set the database's position to what the standalone loop's would be now (the last change
        it dispatched, or the end of an iteration that had none), for a schema change's source
        block and history record. Only schema changes need it; the executors have the changes."""
        progress = self.progress[state.database]
        last_done = progress.last_iteration
        upto = last_done[1] if last_done is not None else None
        if progress.split is not None:
            s, end = progress.split
            if self._any_change(state, s, end):
                upto = previous_lsn(s)   # the ALTER comes right before the first change at or after s
            else:                        # no change after s in this iteration: it comes after the iteration
                last_done, upto = progress.current, end
        position = progress.base
        if upto is not None:
            row = self._last_change(state, upto)
            base = position.position()
            if row is not None and (row[0], row[1]) > (base[0], base[1]) and \
                    (last_done is None or row[0] >= (last_done[0] or ZERO)):
                position = DatabaseOffset(commit_lsn=row[0], change_lsn=row[1], event_serial_no=row[2])
            elif last_done is not None:   # the last iteration had no change: the loop's position is its end
                position = DatabaseOffset(commit_lsn=last_done[1], change_lsn=None, event_serial_no=0)
        state.offset.commit_lsn = position.commit_lsn
        state.offset.change_lsn = position.change_lsn
        state.offset.event_serial_no = position.event_serial_no
        state.offset.snapshot = False
        state.offset.snapshot_completed = False

    def _filters(self, ct: md.ChangeTable) -> tuple[str, list[Any]]:
        where, params = "", []
        if ct.stop_lsn is not None:
            where += " AND [__$start_lsn] < ?"
            params.append(ct.stop_lsn)
        if self._skipped:
            where += f" AND [__$operation] NOT IN ({','.join(self._skipped)})"
        return where, params

    def _change_table(self, db: str, ct: md.ChangeTable) -> str:
        return f"{quote(db)}.[cdc].{quote(ct.capture_instance + '_CT')}"

    def _any_change(self, state: Any, low: bytes, high: bytes) -> bool:
        for ct in state.tables or ():
            where, params = self._filters(ct)
            if state.conn.query(f"SELECT TOP 1 1 FROM {self._change_table(state.database, ct)} WHERE "
                                f"[__$start_lsn] >= ? AND [__$start_lsn] <= ?{where}", (low, high, *params),
                                what=f"reading capture instance {ct.capture_instance!r}"):
                return True
        return False

    def _last_change(self, state: Any, upto: bytes) -> tuple[bytes, bytes, int] | None:
        """The last change (commit LSN, change LSN, event serial number) at or before `upto`."""
        best: tuple[bytes, bytes] | None = None
        for ct in state.tables or ():
            where, params = self._filters(ct)
            rows = state.conn.query(
                f"SELECT TOP 1 [__$start_lsn], [__$seqval] FROM {self._change_table(state.database, ct)} WHERE "
                f"[__$start_lsn] <= ?{where} ORDER BY [__$start_lsn] DESC, [__$seqval] DESC", (upto, *params),
                what=f"reading capture instance {ct.capture_instance!r}")
            if rows and rows[0][0] is not None and rows[0][1] is not None:
                found = (bytes(rows[0][0]), bytes(rows[0][1]))
                if best is None or found > best:
                    best = found
        if best is None:
            return None
        serial = 0  # an update's two rows count 2, as the loop's event serial number does
        for ct in state.tables or ():
            where, params = self._filters(ct)
            serial += int(state.conn.query_one(
                f"SELECT COUNT(*) FROM {self._change_table(state.database, ct)} WHERE [__$start_lsn] = ? AND "
                f"[__$seqval] = ?{where}", (best[0], best[1], *params),
                what=f"reading capture instance {ct.capture_instance!r}") or 0)
        return best[0], best[1], serial

    # -- UnitStream (the feed's thread) ----------------------------------------------------------------

    def get(self, timeout: float) -> tuple[StreamUnit, Offset]:
        if self._pushback:
            return self._pushback.popleft()
        return self.units.get(timeout)

    def between_transactions(self, offset: Offset) -> bool:
        return True  # every window ends at a commit

    def split(self, unit: StreamUnit, end_key: tuple[Any, ...]) -> tuple[StreamUnit | None, StreamUnit]:
        """Cut at a batch's end offset from an earlier run: each database's windows up to its part
        of `end_key`. A database that the earlier run had taken further than this run's units so
        far is taken there now, from the units that follow (the rest of them come next)."""
        targets: dict[str, bytes | None] = {}
        ended: dict[str, bytes] = {}
        for db, part in zip(self.databases, end_key, strict=True):
            if not part:
                continue
            commit, change, serial = _key_part(part)
            if change == COMPLETE and serial > 0 and self._tx:
                ended[db] = commit            # the batch ended with an idle END unit (see end_if_idle)
            if change == COMPLETE or (change == ZERO and serial == 0):
                targets[db] = commit          # the commit is complete (a window's end, a snapshot's LSN)
            else:                             # inside a commit: its changes come with the rest
                targets[db] = previous_lsn(commit) if commit != ZERO else None
        head = StreamUnit(records=list(unit.records), before=unit.before)
        tail = StreamUnit(before=unit.before)
        self._cut_into(unit.windows, targets, head, tail)
        before = parse_offset(unit.before, self.databases) if unit.before else {}
        behind = set()
        for db, target in targets.items():
            have = before.get(db)
            if target is not None and (have is None or have.commit_lsn is None or have.commit_lsn < target) \
                    and all(w.database != db for w in unit.windows):
                behind.add(db)
        pulled: list[tuple[StreamUnit, Offset]] = []
        while behind:
            self.check()
            try:
                nxt, after = self.units.get(1.0)
            except queue.Empty:
                continue
            rest = StreamUnit(before=nxt.before)
            for w in nxt.windows:
                if w.database in behind:
                    self._cut_into([w], targets, head, rest)
                    if (w.to_lsn or ZERO) >= targets[w.database]:
                        behind.discard(w.database)
                else:
                    rest.windows.append(w)
            head.records += nxt.records
            if rest.windows:
                pulled.append((rest, after))
        self._pushback.extend(pulled)
        for db, commit in ended.items():
            self._replay_end(db, commit, head, [tail, *(u for u, _ in pulled)])
        return (head if head.windows or head.records else None), tail

    def _replay_end(self, db: str, commit: bytes, head: StreamUnit, rest: list[StreamUnit]) -> None:
        """The batch being replayed ended with the idle END of the transaction open at `commit`: this
        run, which started before that END, has windows past `commit` instead (a transaction came
        since), whose first would send the END with the next BEGIN, a batch later. The END goes into
        the replayed batch, as it was, and the windows after it count it as sent."""
        template = next((w for w in [*reversed(head.windows), *(w for u in rest for w in u.windows)]
                         if w.database == db), None)
        if template is None or template.tx_floor is None or template.tx_floor >= commit:
            return
        head.windows.append(replace(template, from_lsn=None, to_lsn=commit, start=complete(commit), records=[],
                                    end_tx=None, end_open=True))
        for unit in rest:
            for w in unit.windows:
                if w.database == db and w.tx_floor is not None and w.tx_floor < commit:
                    w.tx_floor = commit
        progress = self.progress[db]
        if progress.tx_floor is not None:  # the loop's thread only moves it forward too
            progress.tx_floor = max(progress.tx_floor, commit)

    @staticmethod
    def _cut_into(windows: list[StreamWindow], targets: dict[str, bytes | None], head: StreamUnit,
                  tail: StreamUnit) -> None:
        for w in windows:
            target = targets.get(w.database)
            if target is None:
                tail.windows.append(w)
                continue
            first, rest = w.cut(target)
            if first is not None:
                head.windows.append(first)
            if rest is not None:
                tail.windows.append(rest)

    def append(self, units: list[Any], unit: StreamUnit) -> None:
        if unit.windows or unit.records:
            units.append(unit)

    def changes(self, unit: StreamUnit) -> int:
        return len(unit.windows) + len(unit.records)

    def nbytes(self, unit: StreamUnit) -> int:
        return _UNIT_BYTES

    def past(self, offset: Offset, target: Any) -> bool:
        entries = parse_offset(offset, self.databases)
        for db, lsn in zip(self.databases, target, strict=True):
            have = entries.get(db)
            if lsn is not None and (have is None or lsn_to_str(have.commit_lsn) is None
                                    or (have.commit_lsn or ZERO) < _lsn(lsn)):
                return False
        return True

    def caught_up(self, target: Any) -> bool:
        """Every database's windows reach `target` (its maximum LSN when the run began), or the loop
        found nothing more in it since; and the feed took every unit."""
        if not self.units.empty() or self._pushback:
            return False
        asked = getattr(self, "_asked", None)
        if asked is None or asked[0] != target:
            self._asked = asked = (target, time.monotonic())
        for db, lsn in zip(self.databases, target, strict=True):
            p = self.progress[db]
            if lsn is None or (p.handed.commit_lsn or ZERO) >= _lsn(lsn):
                continue
            if p.quiet_at > asked[1]:
                continue
            return False
        return True

    def check(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.streamer.close()
        for conn in self.conns.values():
            conn.close()


def _lsn(text: str) -> bytes:
    from headwater.connectors.sqlserver.lsn import lsn_from_str

    value = lsn_from_str(text)
    if value is None:
        raise ConnectorError(f"not an LSN: {text!r}")
    return value


# -- the capture source's Spark methods -----------------------------------------------------------------

# the level a chunk is read at, by snapshot.isolation.mode: the locking modes read without their
# table locks (they cannot cover other connections' reads; see the module's docstring)
CHUNK_ISOLATION = {"read_uncommitted": "read_uncommitted", "read_committed": "read_committed",
                   "repeatable_read": "repeatable_read", "exclusive": "repeatable_read", "snapshot": "snapshot"}

def _record_database(record: Any) -> str | None:
    value = record.value if isinstance(getattr(record, "value", None), dict) else {}
    source = value.get("source") if isinstance(value.get("source"), dict) else {}
    return source.get("db") or value.get("databaseName")


def plan_snapshot_unit(source: SqlServerCaptureSource, point: Any, chunk: SnapshotChunk) -> SnapshotUnit:
    """The unit of one chunk (driver side). A database's snapshot steps — its maximum LSN and
    structure, with the schema history and schema-change events — are done once per snapshot,
    before any executor reads: by completed_offset (Spark asks for the snapshot's end before it
    plans it) or, when this process did not take them (a replayed batch), before the database's
    first unit is made. Its schema changes go out with its first unit; the markers are the plan's
    (per database: the chunk's partition)."""
    c = source.connector
    db = chunk.partition or chunk.table.id.catalog or source.databases[0]
    state = source._db_snapshots.get(db)
    if state is None or not state.started:
        source._conn(db).rollback()  # planning's counts ran outside the snapshot transaction
        state = source._database_snapshot(db, None)
        source._finish_database(db)
    records = [r for r in source._deferred if _record_database(r) == db]
    source._deferred = [r for r in source._deferred if _record_database(r) != db]
    index = source.databases.index(db)
    entry = state.tables.get(chunk.table.id)
    return SnapshotUnit(
        database=db, db_index=index, chunk=chunk, table=entry.table if entry is not None else None,
        lsn=state.lsn, first_table=chunk.first_table, last_table=chunk.last_table,
        isolation=CHUNK_ISOLATION.get(c.snapshot_isolation, "read_committed"),
        fetch_size=c.config.get("snapshot.fetch.size", 2000) or 2000,
        records=[(schema_position(index, i), r) for i, r in enumerate(records)])


def open_unit_stream(source: SqlServerCaptureSource, start: Offset, read_ahead: int) -> SqlServerUnitStream:
    """The streaming loop on a background thread of the driver, on connections of its own."""
    if not source._schema_loaded:
        source._recover_schema(start)
    deferred = source._deferred[:]
    source._deferred.clear()
    units = SqlServerUnitStream(source, start, read_ahead, deferred)
    units.start()
    log.info("streaming databases %s from %s", ", ".join(units.databases),
             ", ".join(f"{db}: {lsn_to_str(p.handed.commit_lsn)}" for db, p in units.progress.items()))
    return units
