"""`headwater signal`: a signal written where the configured channel reads it (file, source; the
kafka channel in tests/engine/signals/test_channels_kafka.py), and its errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from headwater.cli.main import main
from headwater.engine.signals.channels import FileChannel
from headwater.engine.signals.signal import Signal
from helpers.cli import ERROR_PREFIX, HEADWATER, write_config


def properties(path: Path, **extra: str) -> Path:
    props = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.user": "postgres",
        "database.dbname": "inventory",
        "topic.prefix": "srv",
        **extra,
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def test_signal_through_the_file_channel(tmp_path: Path) -> None:
    signals = tmp_path / "signals.txt"
    config = properties(tmp_path / "c.properties", **{"signal.enabled.channels": "source,file",
                                                      "signal.file": str(signals)})
    data = '{"data-collections": ["public.orders"], "type": "blocking"}'
    # the console script, as a user runs it
    done = subprocess.run([str(HEADWATER), "signal", "--config", str(config), "--channel", "file",
                           "--type", "execute-snapshot", "--data", data, "--id", "ad-hoc-1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"signal 'ad-hoc-1' of type 'execute-snapshot' with data {data}: appended to "
                                   f"the signal file '{signals}'")
    # Debezium's file format: one object a line, the data an object
    assert orjson.loads(signals.read_bytes()) == {"id": "ad-hoc-1", "type": "execute-snapshot",
                                                  "data": orjson.loads(data)}
    assert main(["signal", str(config), "--channel", "file", "--type", "log", "--data", '{"message": "m"}']) == 0
    read = FileChannel(signals).read()
    assert read[0] == Signal("ad-hoc-1", "execute-snapshot", '{"data-collections":["public.orders"],"type":"blocking"}',
                             "file")
    assert read[1].type == "log" and len(read[1].id) == 36 and read[1].data == '{"message":"m"}'


def test_without_channel_the_first_sendable_one_is_used(tmp_path: Path, capsys) -> None:
    signals = tmp_path / "signals.txt"
    config = properties(tmp_path / "c.properties", **{"signal.enabled.channels": "in-process,file",
                                                      "signal.file": str(signals)})
    assert main(["signal", "--config", str(config), "--type", "stop-snapshot", "--id", "x"]) == 0
    assert "appended to the signal file" in capsys.readouterr().out
    assert FileChannel(signals).read() == [Signal("x", "stop-snapshot", None, "file")]


@pytest.mark.parametrize(("channels", "args", "error"), [
    ("source,file", ["--type", "log", "--data", "{not json"], "--data is not valid JSON"),
    ("source,file", ["--type", "log", "--data", "[1, 2]"], "--data must be a JSON object"),
    ("source", ["--channel", "file", "--type", "log"],
     "the file signal channel is not enabled (signal.enabled.channels=source)"),
    ("in-process,jmx", ["--type", "log"], "no channel in signal.enabled.channels that `headwater signal` can write"),
    ("source", ["--type", "log"], "the source channel writes to the signal table: set signal.data.collection"),
    ("source,carrier-pigeon", ["--type", "log"], "unknown signal channel(s) carrier-pigeon"),
    ("kafka", ["--type", "log"], "missing required property 'signal.kafka.bootstrap.servers'"),
    ("file", ["--type", "  "], "a signal needs a type"),
])
def test_errors(tmp_path: Path, capsys, channels: str, args: list[str], error: str) -> None:
    config = properties(tmp_path / "c.properties", **{"signal.enabled.channels": channels,
                                                      "signal.file": str(tmp_path / "s.txt")})
    assert main(["signal", str(config), *args]) == 2
    assert error in capsys.readouterr().err
    assert not (tmp_path / "s.txt").exists()


def test_no_configuration(capsys) -> None:
    assert main(["signal", "--type", "log"]) == 2
    assert "no configuration" in capsys.readouterr().err


def test_signal_through_the_signal_table(pg_db, tmp_path: Path) -> None:
    pg_db.execute("CREATE TABLE public.debezium_signal (id varchar(64) PRIMARY KEY, type varchar(32), "
                  "data varchar(2048))")
    config = write_config(tmp_path / "app.properties", pg_db.server, pg_db.name, tmp_path,
                          **{"signal.data.collection": "public.debezium_signal"})
    data = '{"data-collections": ["public.orders"]}'
    done = subprocess.run([str(HEADWATER), "signal", str(config), "--type", "execute-snapshot", "--data", data,
                           "--id", "sig-1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "inserted into the signal table 'public.debezium_signal'" in done.stdout
    assert pg_db.execute("SELECT id, type, data FROM public.debezium_signal") == [("sig-1", "execute-snapshot", data)]

    pg_db.execute("DROP TABLE public.debezium_signal")
    failed = subprocess.run([str(HEADWATER), "signal", str(config), "--type", "log", "--data", '{"message": "m"}'],
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    errors = [line for line in failed.stderr.splitlines() if line.startswith(ERROR_PREFIX)]
    assert len(errors) == 1 and 'relation "public.debezium_signal" does not exist' in errors[0], failed.stderr
