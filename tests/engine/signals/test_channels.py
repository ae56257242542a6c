"""The file and in-process signal channels, signal parsing, the channels' configuration and
send_signal's checks (the Kafka channel: test_channels_kafka.py)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from headwater.config import ConfigError, from_properties
from headwater.engine.signals.channels import (
    FileChannel,
    InProcessChannel,
    KafkaChannel,
    SignalChannelError,
    append_signal_line,
    in_process_channel,
    new_signal,
    open_channels,
    parse_signal,
    send_in_process,
    send_signal,
)
from headwater.engine.signals.signal import Signal, SignalError

BASE = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "127.0.0.1",
    "database.user": "postgres",
    "database.dbname": "inventory",
    "topic.prefix": "srv",
}


def config(**props: Any):
    return from_properties({**BASE, **props}).connector


# ------------------------------------------------------------------------------------------ parsing


def test_parse_signal_takes_debeziums_json_form() -> None:
    line = '{"id": "s1", "type": "execute-snapshot", "data": {"data-collections": ["public.a"], "type": "incremental"}}'
    assert parse_signal(line, "file") == Signal(
        "s1", "execute-snapshot", '{"data-collections":["public.a"],"type":"incremental"}', "file")
    # data as JSON text (as the signal table holds it), no data, a numeric id
    assert parse_signal('{"id": "s2", "type": "log", "data": "{\\"message\\": \\"x\\"}"}', "file").data == \
        '{"message": "x"}'
    assert parse_signal('{"id": 7, "type": "stop-snapshot"}', "kafka") == Signal("7", "stop-snapshot", None, "kafka")
    assert parse_signal('{"type": "log", "data": null}', "kafka", default_id="42") == Signal("42", "log", None, "kafka")


@pytest.mark.parametrize(("text", "reason"), [
    ('{"id": "s1", "type": "log"', "not valid JSON"),
    ('["s1", "log"]', "not a JSON object but an array"),
    ('{"type": "log"}', "no 'id'"),
    ('{"id": "s1", "data": {}}', "no 'type'"),
    ('{"id": "s1", "type": ""}', "'type' must be a non-empty string"),
    ('{"id": true, "type": "log"}', "'id' must be a string, not a boolean"),
    ('{"id": "s1", "type": "log", "data": [1]}', "'data' must be a JSON object, not an array"),
])
def test_parse_signal_says_what_is_wrong(text: str, reason: str) -> None:
    with pytest.raises(SignalError, match=reason.replace("(", r"\(")):
        parse_signal(text, "file")


def test_new_signal() -> None:
    signal = new_signal("execute-snapshot", {"data-collections": ["public.a"]})
    assert signal.type == "execute-snapshot" and signal.channel == "in-process"
    assert orjson.loads(signal.data) == {"data-collections": ["public.a"]}
    assert len(signal.id) == 36 and signal.id != new_signal("log").id  # a new UUID each
    assert new_signal("log", '{"message": "m"}', "id-1", "file") == Signal("id-1", "log", '{"message": "m"}', "file")
    with pytest.raises(SignalError, match="needs a type"):
        new_signal(" ")


# ------------------------------------------------------------------------------------------- file


def test_file_channel_reads_every_line_and_empties_the_file(tmp_path: Path, caplog) -> None:
    path = tmp_path / "signals.txt"
    channel = FileChannel(path)
    channel.start()
    assert channel.read() == []  # no file yet
    path.write_text(
        '{"id": "a", "type": "execute-snapshot", "data": {"data-collections": ["public.t"]}}\n'
        "\n"
        "   \n"
        '{"id": "b", "type": "log", "data": {"message": "x"\n'  # malformed JSON
        '{"id": "c", "data": {}}\n'  # no type
        '{"id": "d", "type": "stop-snapshot", "data": {"data-collections": ["public.t"]}}',  # no final newline
        encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="headwater.signals"):
        signals = channel.read()
    assert [(s.id, s.type, s.channel) for s in signals] == [("a", "execute-snapshot", "file"),
                                                             ("d", "stop-snapshot", "file")]
    assert orjson.loads(signals[0].data) == {"data-collections": ["public.t"]}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "line 4" in warnings[0] and "not valid JSON" in warnings[0]
    assert "line 5" in warnings[1] and "no 'type'" in warnings[1]
    assert path.exists() and path.read_bytes() == b""  # emptied, as Debezium's channel does
    assert channel.read() == []
    append_signal_line(path, Signal("e", "log", '{"message": "again"}', "file"))
    assert channel.read() == [Signal("e", "log", '{"message":"again"}', "file")]
    channel.close()


def test_file_channel_skips_bytes_that_are_not_utf8(tmp_path: Path, caplog) -> None:
    path = tmp_path / "signals.txt"
    path.write_bytes(b'{"id": "\xff", "type": "log"}\n{"id": "ok", "type": "log"}\n')
    with caplog.at_level(logging.WARNING, logger="headwater.signals"):
        assert [s.id for s in FileChannel(path).read()] == ["ok"]
    assert any("line 1" in r.getMessage() and "utf-8" in r.getMessage() for r in caplog.records)


def test_file_channel_on_a_directory_or_an_unusable_file_goes_on(tmp_path: Path, caplog) -> None:
    import os

    assert FileChannel(tmp_path).read() == []
    path = tmp_path / "signals.txt"
    path.symlink_to(path)  # a loop: cannot be opened, whoever runs the test
    channel = FileChannel(path)
    with caplog.at_level(logging.ERROR, logger="headwater.signals"):
        assert channel.read() == [] and channel.read() == []
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "cannot open" in errors[0]  # once, not at every poll
    path.unlink()
    append_signal_line(path, Signal("a", "log", None, "file"))
    assert channel.read() == [Signal("a", "log", None, "file")]

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="headwater.signals"):
        assert FileChannel(fifo).read() == []  # and did not wait for a writer
    assert any("cannot read" in r.getMessage() for r in caplog.records)


def test_file_channel_loses_no_signal_appended_while_it_reads(tmp_path: Path) -> None:
    path = tmp_path / "signals.txt"
    channel = FileChannel(path)
    writers, per_writer = 6, 300
    done = threading.Event()

    def write(w: int) -> None:
        for i in range(per_writer):
            append_signal_line(path, Signal(f"{w}-{i}", "log", '{"message": "m"}', "file"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    received: list[Signal] = []

    def read() -> None:
        while not done.is_set():
            received.extend(channel.read())

    reader = threading.Thread(target=read)
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    received.extend(channel.read())
    ids = [s.id for s in received]
    assert sorted(ids) == sorted(f"{w}-{i}" for w in range(writers) for i in range(per_writer))
    for w in range(writers):  # each writer's signals in the order it wrote them
        mine = [int(i.split("-")[1]) for i in ids if i.startswith(f"{w}-")]
        assert mine == sorted(mine)


# ------------------------------------------------------------------------------------- in-process


def test_in_process_channel() -> None:
    channel = InProcessChannel("srv-inproc")
    with pytest.raises(SignalChannelError, match="not open"):
        channel.send(new_signal("log"))
    with pytest.raises(SignalChannelError, match="no engine of connector 'srv-inproc'"):
        send_in_process("srv-inproc", "log")
    channel.start()
    try:
        assert in_process_channel("srv-inproc") is channel
        sent = [send_in_process("srv-inproc", "execute-snapshot", {"data-collections": ["public.a"]}, "x1")]
        threads = [threading.Thread(target=lambda: sent.append(send_in_process("srv-inproc", "log", '{"m": 1}')))
                   for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        received = channel.read()
        assert received[0] == Signal("x1", "execute-snapshot", '{"data-collections":["public.a"]}', "in-process")
        assert sorted(s.id for s in received) == sorted(s.id for s in sent) and len(received) == 21
        assert channel.read() == []
        channel.send(new_signal("log", None, "late"))
    finally:
        channel.close()
    # closed: unregistered, the unread signal dropped, sending refused
    with pytest.raises(SignalChannelError, match="no engine"):
        in_process_channel("srv-inproc")
    assert channel.read() == []
    with pytest.raises(SignalChannelError, match="not open"):
        channel.send(new_signal("log"))


def test_a_closing_in_process_channel_leaves_its_successor_registered() -> None:
    old, new = InProcessChannel("srv-restart"), InProcessChannel("srv-restart")
    old.start()
    new.start()  # e.g. a Spark query restarted before the old source was stopped
    old.close()
    try:
        assert in_process_channel("srv-restart") is new
    finally:
        new.close()


# ---------------------------------------------------------------------------------- configuration


def test_open_channels_follows_signal_enabled_channels(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="headwater.config"):
        cfg = config(**{"signal.enabled.channels": "source,FILE,in-process,jmx,file",
                        "signal.file": str(tmp_path / "s.txt")})
    assert any("'jmx'" in r.getMessage() and "no effect" in r.getMessage() for r in caplog.records)
    channels = open_channels(cfg)
    assert [c.name for c in channels] == ["file", "in-process"]
    assert channels[0].path == tmp_path / "s.txt"
    assert channels[1].connector_name == "srv"
    assert open_channels(config()) == []  # the default: source only


def test_signal_channel_defaults() -> None:
    cfg = config()
    assert cfg.get("signal.enabled.channels") == ["source"]
    assert cfg.get("signal.file") == "file-signals.txt"
    assert cfg.get("signal.poll.interval.ms") == 5000
    assert cfg.get("signal.kafka.groupId") == "kafka-signal"
    assert cfg.get("signal.kafka.poll.timeout.ms") == 100
    assert cfg.get("kafka.consumer.offset.commit.enabled") is False
    assert cfg.warnings == []


def test_an_unknown_channel_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown signal channel.*custom"):
        config(**{"signal.enabled.channels": "source,mychannel"})


def test_the_kafka_channel_needs_bootstrap_servers() -> None:
    with pytest.raises(ConfigError, match=r"missing required property 'signal\.kafka\.bootstrap\.servers'"):
        config(**{"signal.enabled.channels": "kafka"})
    cfg = config(**{"signal.enabled.channels": "kafka", "signal.kafka.bootstrap.servers": "k1:9092,k2:9092",
                    "signal.consumer.security.protocol": "SSL", "signal.consumer.group.id": "mine",
                    "kafka.consumer.offset.commit.enabled": "true", "signal.kafka.poll.timeout.ms": "0"})
    assert cfg.warnings == []
    channel = KafkaChannel.from_config(cfg)
    assert channel.topic == "srv-signal" and channel.connector_name == "srv"
    assert channel.settings["bootstrap.servers"] == "k1:9092,k2:9092"
    assert channel.settings["security.protocol"] == "SSL"
    assert channel.settings["group.id"] == "mine"  # signal.consumer.* win, as in Debezium
    assert channel.settings["auto.offset.reset"] == "earliest"
    assert channel.commit is True and channel.poll_timeout_s == 0


def test_channel_properties_without_their_channel_are_reported() -> None:
    cfg = config(**{"signal.kafka.topic": "sig", "signal.consumer.security.protocol": "SSL",
                    "signal.file": "x.txt", "kafka.consumer.offset.commit.enabled": "true"})
    assert sorted(cfg.warnings) == sorted(
        f"property '{k}' is ignored: the {c} signal channel is not enabled (signal.enabled.channels)"
        for k, c in (("signal.kafka.topic", "kafka"), ("signal.consumer.security.protocol", "kafka"),
                     ("signal.file", "file"), ("kafka.consumer.offset.commit.enabled", "kafka")))


def test_send_signal_checks_the_channel(tmp_path: Path) -> None:
    signal = new_signal("log", {"message": "m"}, "s1", "file")
    with pytest.raises(SignalChannelError, match="file signal channel is not enabled"):
        send_signal(config(**{"signal.file": str(tmp_path / "s.txt")}), "file", signal)
    cfg = config(**{"signal.enabled.channels": "source,file,in-process", "signal.file": str(tmp_path / "s.txt")})
    with pytest.raises(SignalChannelError, match="send_in_process"):
        send_signal(cfg, "in-process", signal)
    with pytest.raises(SignalChannelError, match="unknown signal channel"):
        send_signal(cfg, "carrier-pigeon", signal)
    with pytest.raises(SignalChannelError, match="incremental source"):
        send_signal(cfg, "source", signal)
    assert "appended to the signal file" in send_signal(cfg, "file", signal)
    assert FileChannel(tmp_path / "s.txt").read() == [Signal("s1", "log", '{"message":"m"}', "file")]


def test_send_signal_source_inserts_through_the_incremental_source() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.rows: list[tuple[str, str, str | None]] = []

        def insert_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
            self.rows.append((signal_id, signal_type, data))

    recorder = Recorder()
    cfg = config(**{"signal.data.collection": "public.debezium_signal"})
    done = send_signal(cfg, "source", new_signal("execute-snapshot", '{"data-collections": ["public.a"]}', "s9"),
                       source=recorder)
    assert recorder.rows == [("s9", "execute-snapshot", '{"data-collections": ["public.a"]}')]
    assert "public.debezium_signal" in done
