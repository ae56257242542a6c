"""Which Python driver reads SQL Server results fastest: mssql-python and python-tds against the
SQL Server emulator (tests/emulators/sqlserver), reading the same table, best of ``--repeat``.

    .venv/bin/python bench/sqlserver_drivers.py [--rows 100000] [--repeat 3]

The table (int, bigint, nvarchar(40), decimal(10,2), datetime2(7)) is filled through the backing
PostgreSQL and read with ``SELECT *``; every run checks the row count and the last row. The
emulator runs in this process (its TDS server in threads), so figures compare the drivers with
each other, not with a real SQL Server.
"""

from __future__ import annotations

import argparse
import sys
import time
from decimal import Decimal
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS_DIR))

from headwater.embedded.postgres import ThrowawayPostgres  # noqa: E402
from helpers.sqlserver import PASSWORD, connect, emulator_in_process  # noqa: E402

SETUP = """CREATE DATABASE bench;
USE bench;
CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, big bigint NOT NULL, name nvarchar(40) NOT NULL,
    amount decimal(10,2) NOT NULL, at datetime2(7) NULL);"""


def read_mssql_python(host: str, port: int) -> list[tuple]:
    conn = connect(host, port, PASSWORD, "bench")
    try:
        cur = conn.cursor()
        cur.execute("SELECT * FROM dbo.t ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


def read_python_tds(host: str, port: int) -> list[tuple]:
    import pytds

    with pytds.connect(server=host, port=port, user="sa", password=PASSWORD, database="bench",
                       autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM dbo.t ORDER BY id")
        return [tuple(r) for r in cur.fetchall()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pg = ThrowawayPostgres().start()
    try:
        with emulator_in_process(pg) as engine:
            host, port = engine.address
            conn = connect(host, port, PASSWORD)
            conn.cursor().execute(SETUP)
            conn.close()
            with pg.connect("bench") as fill, fill.cursor() as cur:
                cur.execute("INSERT INTO dbo.t SELECT g, g * 10, 'name ' || g, g / 100.0, NULL "
                            "FROM generate_series(1, %s) g", (args.rows,))
            for name, read in (("mssql-python", read_mssql_python), ("python-tds", read_python_tds)):
                best = float("inf")
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    rows = read(host, port)
                    best = min(best, time.perf_counter() - start)
                    n = args.rows
                    assert len(rows) == n, f"{name}: {len(rows)} rows, expected {n}"
                    assert rows[-1][:4] == (n, n * 10, f"name {n}", Decimal(n) / 100), rows[-1]
                print(f"{name}: {args.rows / best:,.0f} rows/s (best of {args.repeat}, {best:.2f} s)")
    finally:
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
