"""A random, recorded OLTP workload over a few tables, for delivery-guarantee tests.

Every row carries a ``version`` taken from one global counter and set anew by every insert and
update, so each committed change is identifiable as (table, key, op, version, transaction id).
:class:`Workload` runs random transactions (inserts, updates, primary-key changes, deletes, the
odd TRUNCATE, several tables per transaction, some rolled back) on its own thread, keeps a model
of every table, and records the changes of the transactions that committed, in commit order
(one connection: commit order is the order it ran them in).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg2

Key = tuple[Any, ...]


@dataclass(frozen=True)
class TableSpec:
    name: str
    key_columns: tuple[str, ...]
    ddl: str
    new_key: Callable[[random.Random], Key]
    has_doc: bool = False  # a `doc` column that is sometimes large (TOASTed) and mostly left unchanged


_WORDS = ("x", "y", "alpha", "beta", "γάμμα", "d e", "ü", "z'q")

TABLES: tuple[TableSpec, ...] = (
    TableSpec("items", ("id",),
              "CREATE TABLE items (id int PRIMARY KEY, version int NOT NULL, val text, doc text)",
              lambda rng: (rng.randint(1, 4000),), has_doc=True),
    TableSpec("pairs", ("a", "b"),
              "CREATE TABLE pairs (a int, b text, version int NOT NULL, val text, PRIMARY KEY (a, b))",
              lambda rng: (rng.randint(1, 1000), rng.choice(_WORDS))),
    TableSpec("codes", ("code",),
              "CREATE TABLE codes (code text PRIMARY KEY, version int NOT NULL, val text)",
              lambda rng: (f"k-{rng.randint(1, 3000):04d}{rng.choice(('', 'ö', ' s'))}",)),
    TableSpec("full_rows", ("id",),
              "CREATE TABLE full_rows (id int PRIMARY KEY, version int NOT NULL, val text);"
              " ALTER TABLE full_rows REPLICA IDENTITY FULL",
              lambda rng: (rng.randint(1, 4000),)),
)
SPECS = {t.name: t for t in TABLES}


@dataclass(frozen=True)
class Change:
    """One committed change. ``key`` is None for a truncate; ``version`` is the row version written
    (c/u/r) or removed (d); ``txid`` is the transaction's id (None for snapshot reads)."""

    table: str
    op: str  # r c u d t
    key: Key | None
    version: int | None
    txid: int | None


@dataclass
class Model:
    """The tables as the workload believes they are: table → key → column values."""

    rows: dict[str, dict[Key, dict[str, Any]]] = field(default_factory=lambda: {t.name: {} for t in TABLES})

    def copy(self) -> Model:
        return Model({t: {k: dict(v) for k, v in rows.items()} for t, rows in self.rows.items()})


def _where(spec: TableSpec) -> str:
    return " AND ".join(f"{c} = %s" for c in spec.key_columns)


class Workload:
    """Random transactions until :meth:`finish`; ``changes`` holds what committed, in order."""

    def __init__(self, dsn: str, rng: random.Random, *, pause: tuple[float, float] = (0.3, 0.9),
                 max_truncates: int = 4, max_changes: int = 1500, trickle: float = 2.0) -> None:
        self.thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self.dsn = dsn
        self.rng = rng
        self.pause = pause
        self.max_truncates = max_truncates
        # past max_changes, one small transaction every `trickle` seconds: the pipeline keeps
        # getting batches, but the backlog it has to catch up on stays bounded on a slow machine
        self.max_changes = max_changes
        self.trickle = trickle
        self.model = Model()
        self.version = 0
        self.changes: list[Change] = []
        self.committed = self.rolled_back = self.truncates = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    # -- set-up ---------------------------------------------------------------------------------
    def create(self, rows_per_table: dict[str, int]) -> list[Change]:
        """Create the tables and fill them (before any capture starts); returns the rows as the
        snapshot reads ('r' changes)."""
        conn = psycopg2.connect(self.dsn)
        try:
            with conn, conn.cursor() as cur:
                for spec in TABLES:
                    cur.execute(spec.ddl)
                for spec in TABLES:
                    for _ in range(rows_per_table.get(spec.name, 0)):
                        self._insert(cur, spec, [])
        finally:
            conn.close()
        return [Change(t, "r", k, row["version"], None)
                for t, rows in self.model.rows.items() for k, row in rows.items()]

    # -- the thread -----------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def finish(self, timeout: float = 60) -> None:
        self._halt.set()
        if self.thread.ident is not None:
            self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("the workload thread did not stop")
        if self.error is not None:
            raise AssertionError(f"the workload failed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            conn = psycopg2.connect(self.dsn)
            try:
                with conn.cursor() as cur:
                    # the throwaway cluster runs with synchronous_commit=off: make "committed" mean
                    # flushed, so that what the test counts as committed is what the WAL holds
                    cur.execute("SET synchronous_commit = on")
                conn.commit()
                while not self._halt.is_set():
                    small = len(self.changes) >= self.max_changes
                    self._transaction(conn, small)
                    self._halt.wait(self.trickle if small else self.rng.uniform(*self.pause))
            finally:
                conn.close()
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def _transaction(self, conn: Any, small: bool = False) -> None:
        rng = self.rng
        saved, saved_version = self.model.copy(), self.version
        pending: list[Change] = []
        with conn.cursor() as cur:
            cur.execute("SELECT txid_current()")
            txid = cur.fetchone()[0]
            tables = rng.sample(TABLES, 1 if small else rng.choice((1, 1, 1, 2, 2, 3)))
            statements = 1 if small else rng.randint(1, 20) if rng.random() < 0.2 else rng.randint(1, 5)
            for _ in range(statements):
                spec = rng.choice(tables)
                if self.truncates < self.max_truncates and rng.random() < 0.004:
                    cur.execute(f"TRUNCATE {spec.name}")
                    self.model.rows[spec.name].clear()
                    pending.append(Change(spec.name, "t", None, None, txid))
                    self.truncates += 1
                    continue
                rows = self.model.rows[spec.name]
                roll = rng.random()
                if not rows or roll < 0.35 or (len(rows) < 30 and roll < 0.7):
                    if not self._insert(cur, spec, pending, txid):
                        self._delete(cur, spec, rng.choice(list(rows)), pending, txid)
                elif roll < 0.7:
                    self._update(cur, spec, rng.choice(list(rows)), pending, txid, change_key=False)
                elif roll < 0.8:
                    self._update(cur, spec, rng.choice(list(rows)), pending, txid, change_key=True)
                else:
                    self._delete(cur, spec, rng.choice(list(rows)), pending, txid)
        if rng.random() < 0.08:
            conn.rollback()
            self.model, self.version = saved, saved_version
            self.rolled_back += 1
            return
        conn.commit()
        self.changes.extend(pending)
        self.committed += 1

    # -- statements -----------------------------------------------------------------------------
    def _next_version(self) -> int:
        self.version += 1
        return self.version

    def _free_key(self, spec: TableSpec) -> Key | None:
        rows = self.model.rows[spec.name]
        for _ in range(100):
            key = spec.new_key(self.rng)
            if key not in rows:
                return key
        return None  # the key space is (nearly) full

    def _doc(self) -> str | None:
        roll = self.rng.random()
        if roll < 0.25:
            # incompressible and > 2 kB: stored out of line (TOAST), so an update that leaves it
            # alone sends it as "unchanged" and the event carries the placeholder
            return self.rng.randbytes(3000).hex()
        return None if roll < 0.4 else f"doc {self.rng.randint(0, 10**6)}"

    def _insert(self, cur: Any, spec: TableSpec, pending: list[Change], txid: int | None = None) -> bool:
        key = self._free_key(spec)
        if key is None:
            return False
        row = dict(zip(spec.key_columns, key, strict=True))
        row["version"] = self._next_version()
        row["val"] = f"v{row['version']}-{self.rng.choice(_WORDS)}" if self.rng.random() < 0.9 else None
        if spec.has_doc:
            row["doc"] = self._doc()
        columns = list(row)
        cur.execute(f"INSERT INTO {spec.name} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
                    [row[c] for c in columns])
        self.model.rows[spec.name][key] = row
        pending.append(Change(spec.name, "c", key, row["version"], txid))
        return True

    def _update(self, cur: Any, spec: TableSpec, key: Key, pending: list[Change], txid: int,
                change_key: bool) -> None:
        rows = self.model.rows[spec.name]
        row = dict(rows[key])
        sets: dict[str, Any] = {"version": self._next_version(),
                                "val": f"u{self.version}" if self.rng.random() < 0.9 else None}
        new_key = key
        if change_key:
            free = self._free_key(spec)
            if free is None:
                change_key = False
            else:
                new_key = free
                sets.update(zip(spec.key_columns, new_key, strict=True))
        if spec.has_doc and (change_key or self.rng.random() < 0.2):
            # a primary-key change always rewrites doc: with REPLICA IDENTITY DEFAULT an unchanged
            # TOASTed value is not in the WAL, so the new key's create event could not carry it
            sets["doc"] = self._doc()
        cur.execute(f"UPDATE {spec.name} SET {', '.join(f'{c} = %s' for c in sets)} WHERE {_where(spec)}",
                    [*sets.values(), *key])
        assert cur.rowcount == 1, (spec.name, key)
        row.update(sets)
        if change_key:
            del rows[key]
            rows[new_key] = row
            pending.append(Change(spec.name, "d", key, None, txid))
            pending.append(Change(spec.name, "c", new_key, row["version"], txid))
        else:
            rows[key] = row
            pending.append(Change(spec.name, "u", key, row["version"], txid))

    def _delete(self, cur: Any, spec: TableSpec, key: Key, pending: list[Change], txid: int) -> None:
        cur.execute(f"DELETE FROM {spec.name} WHERE {_where(spec)}", list(key))
        assert cur.rowcount == 1, (spec.name, key)
        del self.model.rows[spec.name][key]
        pending.append(Change(spec.name, "d", key, None, txid))


__all__ = ["SPECS", "TABLES", "Change", "Key", "Model", "TableSpec", "Workload"]
