"""A random workload on SQL Server databases (the emulator) for the Spark tests: two captured tables
per database (an int key, a composite key), rows inserted, updated and deleted in small
transactions, every committed change remembered as (database, table, key, op, version) — each
insert and update sets the row's `version` to a number never used before."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from helpers.sqlserver import connect

TABLES = {"items": ("id",), "pairs": ("a", "b")}
SETUP = """
CREATE TABLE dbo.items (id int NOT NULL PRIMARY KEY, name nvarchar(40) NULL, version int NOT NULL);
CREATE TABLE dbo.pairs (a int NOT NULL, b nvarchar(10) NOT NULL, qty decimal(10, 2) NULL, version int NOT NULL,
                        PRIMARY KEY (a, b));
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', @role_name = NULL,
     @supports_net_changes = 0;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'pairs', @role_name = NULL,
     @supports_net_changes = 0;
"""

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Change:
    database: str
    table: str
    key: Key
    op: str        # c, u, d (r: a row before the workload)
    version: int   # the row's version after the change (a delete: the version it had)


def create_databases(server: Any, names: list[str], rows: int) -> list[Change]:
    """Fresh CDC-enabled databases with the two tables and `rows` rows each; the rows as `r` changes."""
    out: list[Change] = []
    for db in names:
        server.execute(f"IF DB_ID(N'{db}') IS NOT NULL DROP DATABASE [{db}]")
        server.execute(f"CREATE DATABASE [{db}]")
        server.execute(f"ALTER DATABASE [{db}] SET ALLOW_SNAPSHOT_ISOLATION ON")
        server.execute("EXEC sys.sp_cdc_enable_db", database=db)
        server.execute(SETUP, database=db)
        values_items, values_pairs = [], []
        for i in range(1, rows + 1):
            values_items.append(f"({i}, N'item {i}', 0)")
            values_pairs.append(f"({i}, N'k{i % 3}', {i}.50, 0)")
            out += [Change(db, "items", (i,), "r", 0), Change(db, "pairs", (i, f"k{i % 3}"), "r", 0)]
        for start in range(0, rows, 500):
            server.execute("INSERT INTO dbo.items VALUES " + ", ".join(values_items[start:start + 500]), database=db)
            server.execute("INSERT INTO dbo.pairs VALUES " + ", ".join(values_pairs[start:start + 500]), database=db)
    return out


@dataclass
class Workload:
    """Random changes in transactions of one to three statements on a thread, until stopped."""

    server: Any
    databases: list[str]
    rows: int
    seed: int
    pause: float = 0.005
    changes: list[Change] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlserver-workload", daemon=True)
        self._version = 0
        # the rows that exist, per (database, table): key -> version
        self.live: dict[tuple[str, str], dict[Key, int]] = {
            (db, t): {((i,) if t == "items" else (i, f"k{i % 3}")): 0 for i in range(1, self.rows + 1)}
            for db in self.databases for t in TABLES}
        self._next = {(db, t): self.rows + 1 for db in self.databases for t in TABLES}

    def start(self) -> Workload:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise AssertionError(f"the workload failed: {self.error!r}")

    def _run(self) -> None:
        conns = {db: connect(self.server.host, self.server.port, self.server.password, db, autocommit=False)
                 for db in self.databases}
        try:
            while not self._stop.is_set():
                db = self.rng.choice(self.databases)
                self._transaction(db, conns[db])
                time.sleep(self.pause)
        except BaseException as exc:  # handed to stop()
            self.error = exc
        finally:
            for conn in conns.values():
                conn.close()

    def _transaction(self, db: str, conn: Any) -> None:
        cur = conn.cursor()
        done: list[Change] = []
        live = {k: dict(v) for k, v in self.live.items() if k[0] == db}
        for _ in range(self.rng.randint(1, 3)):
            table = self.rng.choice(list(TABLES))
            rows = live[(db, table)]
            self._version += 1
            version = self._version
            op = self.rng.choices(["c", "u", "d"], [3, 5, 2])[0] if rows else "c"
            if op == "c":
                n = self._next[(db, table)]
                self._next[(db, table)] = n + 1
                key: Key = (n,) if table == "items" else (n, f"k{n % 3}")
                if table == "items":
                    cur.execute("INSERT INTO dbo.items (id, name, version) VALUES (?, ?, ?)", n, f"new {n}", version)
                else:
                    cur.execute("INSERT INTO dbo.pairs (a, b, qty, version) VALUES (?, ?, ?, ?)", n, key[1], "1.25",
                                version)
                rows[key] = version
            else:
                key = self.rng.choice(sorted(rows))
                where = "id = ?" if table == "items" else "a = ? AND b = ?"
                if op == "u":
                    column = "name = ?" if table == "items" else "qty = ?"
                    cur.execute(f"UPDATE dbo.{table} SET {column}, version = ? WHERE {where}",
                                f"v{version}" if table == "items" else f"{version % 1000}.75", version, *key)
                    rows[key] = version
                else:
                    version = rows.pop(key)
                    cur.execute(f"DELETE FROM dbo.{table} WHERE {where}", *key)
            done.append(Change(db, table, key, op, version))
        conn.commit()
        self.live.update(live)
        self.changes += done


def table_rows(server: Any, db: str, table: str) -> set[tuple[Any, ...]]:
    """The table's rows as (key..., version, other column as text)."""
    if table == "items":
        rows = server.execute("SELECT id, version, name FROM dbo.items", database=db)
    else:
        rows = server.execute("SELECT a, b, version, CONVERT(varchar(20), qty) FROM dbo.pairs", database=db)
    return {tuple(r) for r in rows}
