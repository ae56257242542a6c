"""The kafka signal channel and `headwater signal --channel kafka`, against a real Apache Kafka
broker (one KRaft node, tests/helpers/kafka.py)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import orjson
import pytest

from headwater.cli.main import main
from headwater.config import from_properties
from headwater.engine.signals import channels as channels_module
from headwater.engine.signals.channels import KafkaChannel, SignalChannelError, new_signal, send_signal
from headwater.engine.signals.signal import Signal


@pytest.fixture(scope="module")
def kafka() -> Iterator[Any]:
    """A broker of this module's own: topics created on first use get one partition, as a signal topic must."""
    from helpers.kafka import running_broker

    yield from running_broker(partitions=1)


def props(kafka: Any, prefix: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1",
        "database.user": "postgres",
        "database.dbname": "inventory",
        "topic.prefix": prefix,
        "signal.enabled.channels": "source,kafka",
        "signal.kafka.bootstrap.servers": kafka.bootstrap_servers,
        "signal.kafka.poll.timeout.ms": "200",
        **extra,
    }


def config(kafka: Any, prefix: str, **extra: str):
    return from_properties(props(kafka, prefix, **extra)).connector


def produce(kafka: Any, topic: str, records: list[tuple[str | None, bytes | None]]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for key, value in records:
        producer.produce(topic, key=key.encode() if key is not None else None, value=value, partition=0)
    assert producer.flush(30) == 0


def read_until(channel: KafkaChannel, count: int, timeout: float = 30.0) -> list[Signal]:
    got: list[Signal] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got.extend(channel.read())
    return got


def committed(kafka: Any, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group})
    try:
        [tp] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=30)
        return tp.offset
    finally:
        consumer.close()


def unique(name: str) -> str:
    return f"{name}{uuid.uuid4().hex[:8]}"


def test_reads_the_connectors_signals_and_skips_the_rest(kafka: Any, caplog) -> None:
    prefix = unique("srv")
    channel = KafkaChannel.from_config(config(kafka, prefix))
    channel.start()  # the topic does not exist yet: read from its beginning once it does
    try:
        assert channel.read() == []
        good = {"id": "s1", "type": "execute-snapshot", "data": {"data-collections": ["public.a"]}}
        produce(kafka, f"{prefix}-signal", [
            ("another-connector", orjson.dumps({**good, "id": "not-mine"})),
            (None, orjson.dumps({**good, "id": "no-key"})),
            (prefix, orjson.dumps(good)),
            (prefix, b'{"id": "s2", "type": '),  # malformed
            (prefix, orjson.dumps({"id": "s3", "data": {}})),  # no type
            (prefix, None),  # a tombstone
            (prefix, orjson.dumps({"type": "log", "data": {"message": "no id"}})),  # id: the offset
        ])
        with caplog.at_level(logging.INFO, logger="headwater.signals"):
            signals = read_until(channel, 2)
            time.sleep(0.3)
            signals += channel.read()
    finally:
        channel.close()
    assert signals == [Signal("s1", "execute-snapshot", '{"data-collections":["public.a"]}', "kafka"),
                       Signal("6", "log", '{"message":"no id"}', "kafka")]
    messages = [r.getMessage() for r in caplog.records]
    assert any("offset 0" in m and "'another-connector'" in m and "topic.prefix" in m for m in messages)
    assert any("offset 1" in m and "None" in m for m in messages)
    skipped = [m for m in messages if "skipped the record" in m]
    assert any("offset 3" in m and "not valid JSON" in m for m in skipped), messages
    assert any("offset 4" in m and "no 'type'" in m for m in skipped), messages


def test_without_commits_it_starts_at_the_end_and_commits_nothing(kafka: Any) -> None:
    prefix, group = unique("srv"), unique("group")
    topic = f"{prefix}-signal"
    produce(kafka, topic, [(prefix, orjson.dumps({"id": "old", "type": "log", "data": {"message": "m"}}))])
    cfg = config(kafka, prefix, **{"signal.kafka.groupId": group})
    channel = KafkaChannel.from_config(cfg)
    channel.start()
    try:
        send_signal(cfg, "kafka", new_signal("log", {"message": "m"}, "new", "kafka"))
        signals = read_until(channel, 1)
        time.sleep(0.3)
        signals += channel.read()
    finally:
        channel.close()
    assert [s.id for s in signals] == ["new"]  # "old" was sent before the channel started: not read
    assert committed(kafka, group, topic) == confluent_kafka.OFFSET_INVALID


def test_with_commits_signals_are_committed_once_handed_over(kafka: Any) -> None:
    prefix, group = unique("srv"), unique("group")
    topic = f"{prefix}-signal"
    cfg = config(kafka, prefix, **{"signal.kafka.groupId": group, "kafka.consumer.offset.commit.enabled": "true"})
    for signal_id in ("s1", "s2"):  # before any consumer: read from the beginning (earliest, as Debezium)
        send_signal(cfg, "kafka", new_signal("log", {"message": signal_id}, signal_id, "kafka"))
    channel = KafkaChannel.from_config(cfg)
    channel.start()
    try:
        assert [s.id for s in read_until(channel, 2)] == ["s1", "s2"]
        # returned, not yet acted on: nothing committed until the next read
        assert committed(kafka, group, topic) == confluent_kafka.OFFSET_INVALID
        channel.read()
        assert committed(kafka, group, topic) == 2
        send_signal(cfg, "kafka", new_signal("log", {"message": "s3"}, "s3", "kafka"))
        assert [s.id for s in read_until(channel, 1)] == ["s3"]
    finally:
        channel.close()  # commits what the last read returned
    assert committed(kafka, group, topic) == 3

    send_signal(cfg, "kafka", new_signal("log", {"message": "s4"}, "s4", "kafka"))
    again = KafkaChannel.from_config(cfg)
    again.start()  # at the committed offset: only what came after
    try:
        signals = read_until(again, 1)
        time.sleep(0.3)
        signals += again.read()
    finally:
        again.close()
    assert [s.id for s in signals] == ["s4"]


def test_a_topic_with_several_partitions_is_reported(kafka: Any, caplog) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    prefix = unique("srv")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.create_topics([NewTopic(f"{prefix}-signal", num_partitions=3)]).values():
        future.result(30)
    channel = KafkaChannel.from_config(config(kafka, prefix))
    with caplog.at_level(logging.WARNING, logger="headwater.signals"):
        channel.start()
    channel.close()
    assert any("has 3 partitions; only partition 0 is read" in r.getMessage() for r in caplog.records)


def test_invalid_consumer_settings_fail_at_start(kafka: Any) -> None:
    channel = KafkaChannel.from_config(config(kafka, unique("srv"), **{"signal.consumer.no.such.setting": "1"}))
    with pytest.raises(SignalChannelError, match=r"consumer settings .* not valid.*no\.such\.setting"):
        channel.start()


def test_sending_to_an_unreachable_cluster_fails_plainly(kafka: Any, monkeypatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(channels_module, "SEND_TIMEOUT_S", 1.0)
    cfg = from_properties(props(kafka, "srv", **{"signal.kafka.bootstrap.servers": f"127.0.0.1:{port}"})).connector
    started = time.monotonic()
    with pytest.raises(SignalChannelError, match="no answer from the Kafka cluster within 1 s"):
        send_signal(cfg, "kafka", new_signal("log", {"message": "m"}, "s1", "kafka"))
    assert time.monotonic() - started < 10


def test_headwater_signal_command_through_kafka(kafka: Any, tmp_path, capsys) -> None:
    prefix = unique("srv")
    path = tmp_path / "connector.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props(kafka, prefix).items()), encoding="utf-8")
    channel = KafkaChannel.from_config(config(kafka, prefix))
    channel.start()
    try:
        data = '{"data-collections": ["public.orders"], "type": "incremental"}'
        code = main(["signal", "--config", str(path), "--channel", "kafka", "--type", "execute-snapshot",
                     "--data", data, "--id", "cli-1"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "'cli-1'" in out and f"topic '{prefix}-signal'" in out
        # without --channel: the first of source, file, kafka enabled, here source, without a signal table
        assert main(["signal", str(path), "--type", "log", "--data", '{"message": "hi"}']) == 2
        assert "set signal.data.collection" in capsys.readouterr().err
        assert main(["signal", str(path), "--set", "signal.enabled.channels=kafka", "--type", "log",
                     "--data", '{"message": "hi"}']) == 0
        signals = read_until(channel, 2)
    finally:
        channel.close()
    assert signals[0] == Signal("cli-1", "execute-snapshot",
                                '{"data-collections":["public.orders"],"type":"incremental"}', "kafka")
    assert signals[1].type == "log" and len(signals[1].id) == 36  # a UUID
