"""SQL layer against the recorded scenarios' own T-SQL (scenarios/*/setup.sql and workload.sql, split at
GO as record.py splits them): every batch runs without an error, and the types scenario's extreme
values come back exactly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from emulators.sqlserver import record as rec
from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import PASSWORD, collect, engine_with
from emulators.sqlserver.results import LoginInfo
from emulators.sqlserver.values import DateTime2, DateTimeOffset, Time

SCENARIOS = Path(rec.__file__).resolve().parent / "scenarios"
SCRIPTS = sorted(p for p in SCENARIOS.iterdir() if p.is_dir() and (p / "setup.sql").exists())


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with engine_with(capture_interval=0.2) as srv:
        yield srv


def run_script(server: EmulatorServer, path: Path) -> list[str]:
    problems = []
    session = server.open_session(LoginInfo("sa", PASSWORD))
    try:
        for batch in rec.split_batches(path.read_text()):
            if not isinstance(batch, str):
                continue
            out = collect(session.execute_batch(batch))
            problems += [f"{path.parent.name}/{path.name}: {m.number} {m.text} <- {batch[:80]!r}" for m in out.errors]
    finally:
        session.close()
    return problems


def drop_user_databases(server: EmulatorServer) -> None:
    session = server.open_session(LoginInfo("sa", PASSWORD))
    try:
        for name in [d.name for d in server.databases.values() if d.name.lower() != "master"]:
            out = collect(session.execute_batch(f"DROP DATABASE [{name}]"))
            assert out.errors == [], out.errors
    finally:
        session.close()


@pytest.mark.parametrize("scenario", SCRIPTS, ids=lambda p: p.name)
def test_scenario_scripts_run_cleanly(server: EmulatorServer, scenario: Path) -> None:
    problems = run_script(server, scenario / "setup.sql")
    if (scenario / "workload.sql").exists():
        problems += run_script(server, scenario / "workload.sql")
    try:
        assert problems == []
        if scenario.name == "types":
            check_type_extremes(server)
    finally:
        drop_user_databases(server)


def check_type_extremes(server: EmulatorServer) -> None:
    session = server.open_session(LoginInfo("sa", PASSWORD, database="types"))
    try:
        out = collect(session.execute_batch(
            "SELECT c_numeric_38, c_money, c_smalldatetime, c_datetime2_7, c_datetimeoffset7, c_time2, c_binary "
            "FROM dbo.all_types WHERE id = 4"))
        assert out.rows == [(
            Decimal("-9999999999999999999999999999.9999999999"), Decimal("922337203685477.5807"),
            dt.datetime(2079, 6, 6, 23, 59), DateTime2(dt.date(9999, 12, 31), Time(863_999_999_999)),
            DateTimeOffset(DateTime2(dt.date(9999, 12, 31), Time(863_999_999_999)), -840), Time(863_999_900_000),
            b"\0\0\0\0")]
    finally:
        session.close()
