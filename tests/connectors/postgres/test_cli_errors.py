"""`headwater run` / `headwater validate` failures, through the real console script: a non-zero exit
and one `headwater: error:` line on stderr that names the cause (and never a password)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import ERROR_PREFIX, error_line, headwater, write_config


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
