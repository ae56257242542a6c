"""`headwater run` / `headwater validate` failures, through the real console script: a non-zero exit
and one `headwater: error:` line on stderr that names the cause (and never a password)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEADWATER = Path(sys.prefix) / "bin" / "headwater"
if not HEADWATER.exists():  # pragma: no cover - the tests are run from the project's virtualenv
    HEADWATER = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "headwater"

ERROR_PREFIX = "headwater: error: "


def write_config(path: Path, server, dbname: str, workdir: Path, **source: str) -> Path:
    """A Debezium Server application.properties for `server`/`dbname`; `source` adds or replaces
    `debezium.source.*` properties (a value of None removes one)."""
    props: dict[str, str | None] = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": server.host,
        "database.port": str(server.port),
        "database.user": server.user,
        "database.dbname": dbname,
        "topic.prefix": "dbserver1",
        "slot.name": f"hw_cli_{workdir.name[-12:].lower().replace('-', '_')}",
        "slot.drop.on.stop": "true",
        "offset.storage.file.filename": str(workdir / "offsets.json"),
        "offset.flush.interval.ms": "100",
    }
    if server.password is not None:
        props["database.password"] = server.password
    props.update(source)
    lines = [f"debezium.source.{k}={v}" for k, v in props.items() if v is not None]
    lines += ["debezium.sink.type=jsonl", f"debezium.sink.jsonl.path={workdir / 'out.jsonl'}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def headwater(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HEADWATER), *map(str, args)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def error_line(res: subprocess.CompletedProcess[str]) -> str:
    """The `headwater: error:` message, asserted to be exactly one line and the last thing printed."""
    lines = res.stderr.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1, f"expected one '{ERROR_PREFIX}' line, stderr was:\n{res.stderr}"
    assert errors[0] == len(lines) - 1, (
        f"the error message is not one line (it continues on {len(lines) - 1 - errors[0]} more line(s)); "
        f"stderr was:\n{res.stderr}")
    return lines[errors[0]][len(ERROR_PREFIX):]


def test_unknown_property_suggests_the_right_name(pg_db, tmp_path: Path) -> None:
    config = write_config(tmp_path / "app.properties", pg_db.server, pg_db.name, tmp_path, **{"slot.nam": "x"})
    res = headwater("run", config)
    assert res.returncode != 0, res.stderr
    message = error_line(res)
    assert "slot.nam" in message
    assert "did you mean 'slot.name'" in message


def test_wrong_password_is_reported_without_the_password(pg_cluster, tmp_path: Path) -> None:
    server = pg_cluster(password="secret")
    config = write_config(tmp_path / "app.properties", server, "postgres", tmp_path,
                          **{"database.password": "wrong"})
    res = headwater("run", config)
    assert res.returncode != 0, res.stderr
    message = error_line(res)
    assert "password authentication failed" in message
    assert "wrong" not in res.stderr
    assert "wrong" not in res.stdout


def test_wal_level_replica_is_refused(pg_cluster, tmp_path: Path) -> None:
    server = pg_cluster(settings={"wal_level": "replica"})
    config = write_config(tmp_path / "app.properties", server, "postgres", tmp_path)
    res = headwater("run", config)
    assert res.returncode != 0, res.stderr
    message = error_line(res)
    assert "wal_level=logical" in message
    assert "wal_level=replica" in message


def test_include_list_matching_no_table_is_named(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY)")
    config = write_config(tmp_path / "app.properties", pg_db.server, pg_db.name, tmp_path,
                          **{"table.include.list": "public.nope"})
    res = headwater("run", config)
    assert res.returncode != 0, res.stderr
    message = error_line(res)
    assert "'public.nope'" in message
    assert "table.include.list" in message


def test_validate_good_file_and_bad_enum(pg_db, tmp_path: Path) -> None:
    good = write_config(tmp_path / "good.properties", pg_db.server, pg_db.name, tmp_path)
    res = headwater("validate", good)
    assert res.returncode == 0, res.stderr
    assert ERROR_PREFIX not in res.stderr
    assert "valid" in res.stdout

    bad = write_config(tmp_path / "bad.properties", pg_db.server, pg_db.name, tmp_path,
                       **{"snapshot.mode": "sometimes"})
    res = headwater("validate", bad)
    assert res.returncode == 2, res.stderr
    message = error_line(res)
    assert "snapshot.mode" in message
    assert "'sometimes'" in message
    for allowed in ("always", "initial", "initial_only", "no_data", "when_needed"):
        assert allowed in message


@pytest.mark.parametrize("garbage", ["{not json at all", "[1, 2, 3]"])
def test_corrupt_offsets_file_is_named(pg_db, tmp_path: Path, garbage: str) -> None:
    pg_db.execute("CREATE TABLE public.items (id int PRIMARY KEY)")
    offsets = tmp_path / "offsets.json"
    offsets.write_text(garbage, encoding="utf-8")
    config = write_config(tmp_path / "app.properties", pg_db.server, pg_db.name, tmp_path)
    res = headwater("run", config)
    assert res.returncode != 0, res.stderr
    message = error_line(res)
    assert str(offsets) in message
    assert "corrupt" in message
    assert offsets.read_text(encoding="utf-8") == garbage, "the corrupt offsets file must be left alone"
