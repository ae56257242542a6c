"""The Java programs compile against every jar set they run with, and JdbcProbe's script reading and
connection-error reporting work (no server needed for either)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulators.sqlserver.jvm import (
    ClasspathError,
    compile_sources,
    find_classpath,
    run_jdbc_probe,
    source_launcher_problem,
)
from emulators.sqlserver.jvm.classpath import DEBEZIUM_JARS, JDBC_JARS, Classpath, candidates, missing_jars
from emulators.sqlserver.jvm.launch import parse_probe_script


@pytest.fixture(scope="module")
def launcher() -> None:
    problem = source_launcher_problem()
    if problem:
        pytest.fail(problem)


def _usable() -> list[Classpath]:
    return [cp for cp in candidates() if cp.directory.is_dir() and not missing_jars(cp.directory, DEBEZIUM_JARS)]


def test_some_jar_set_is_available() -> None:
    if not _usable():
        pytest.fail("no Debezium/mssql-jdbc jars: run scripts/fetch_jars.sh")
    assert find_classpath().directory == _usable()[0].directory


@pytest.mark.parametrize("origin", ["maven", "oracle"])
def test_sources_compile(origin: str, launcher: None, tmp_path: Path) -> None:
    matching = [cp for cp in _usable() if cp.origin == origin]
    if not matching:
        if origin == "maven":  # scripts/setup.sh fetches these: every machine that runs the tests has them
            pytest.fail("no Maven jar set: run scripts/fetch_jars.sh")
        pytest.skip(f"no {origin} jar set here")
    compile_sources(matching[0], tmp_path)
    assert {p.name for p in tmp_path.glob("*.class")} >= {"JdbcProbe.class", "DebeziumRunner.class"}


@pytest.fixture(scope="module")
def jdbc_classpath(launcher: None) -> Classpath:
    try:
        return find_classpath(JDBC_JARS)
    except ClasspathError as e:
        pytest.fail(str(e))


def test_probe_reads_scripts_as_python_writes_them(jdbc_classpath: Classpath) -> None:
    commands = [
        {"op": "execute", "sql": "SELECT N'é\"\\x' AS [a b]", "params": [
            {"type": "int", "value": -1}, {"type": "decimal", "value": "12.3400"},
            {"type": "null", "sql_type": "INTEGER"}, {"type": "bit", "value": True}]},
        {"op": "metadata", "method": "getTables", "args": ["testDB", None, "%", ["TABLE", "VIEW"]]},
        {"op": "autocommit", "value": False},
        {"op": "execute", "sql": "SELECT 1", "get": {"1": "getObject:java.time.OffsetDateTime"}},
    ]
    assert parse_probe_script(commands, jdbc_classpath) == commands


def test_probe_reports_a_refused_connection(jdbc_classpath: Classpath) -> None:
    lines = run_jdbc_probe("127.0.0.1:1", "pw", [{"op": "info"}], url_properties="loginTimeout=1",
                           classpath=jdbc_classpath)
    assert len(lines) == 1
    assert lines[0]["connect"].startswith("jdbc:sqlserver://127.0.0.1:1;encrypt=false;")
    assert lines[0]["error"]["sql_state"] == "08S01"
    assert "Connection refused" in lines[0]["error"]["message"]
