from __future__ import annotations

import re
from pathlib import Path

from headwater.config import connector_fields
from headwater.config.common import COMMON_FIELDS
from headwater.config.docs import render_markdown
from headwater.config.sinks import SINK_FIELDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"

# Every property name in the tables of spec/postgresql.md §11.1-§11.4 (PG-259 .. PG-362).
SPEC_PROPERTIES = """
name connector.class tasks.max plugin.name slot.name slot.drop.on.stop publication.name database.hostname
database.port database.user database.password database.dbname topic.prefix schema.include.list
schema.exclude.list table.include.list table.exclude.list column.include.list column.exclude.list
skip.messages.without.change time.precision.mode decimal.handling.mode hstore.handling.mode
interval.handling.mode database.sslmode database.sslcert database.sslkey database.sslpassword
database.sslrootcert database.tcpKeepAlive tombstones.on.delete column.truncate.to.5.chars
column.mask.with.5.chars column.mask.hash.SHA-256.with.salt.x column.mask.hash.v2.SHA-256.with.salt.x
column.propagate.source.type datatype.propagate.source.type message.key.columns publication.autocreate.mode
replica.identity.autoset.values binary.handling.mode schema.name.adjustment.mode field.name.adjustment.mode
money.fraction.digits message.prefix.include.list message.prefix.exclude.list converters snapshot.mode
snapshot.mode.configuration.based.snapshot.data snapshot.mode.configuration.based.snapshot.schema
snapshot.mode.configuration.based.start.stream snapshot.mode.configuration.based.snapshot.on.schema.error
snapshot.mode.configuration.based.snapshot.on.data.error snapshot.mode.custom.name snapshot.locking.mode
snapshot.locking.mode.custom.name snapshot.query.mode snapshot.query.mode.custom.name
snapshot.include.collection.list snapshot.lock.timeout.ms snapshot.select.statement.overrides
event.processing.failure.handling.mode max.batch.size max.queue.size max.queue.size.in.bytes
poll.interval.ms include.unknown.datatypes database.initial.statements status.update.interval.ms
heartbeat.interval.ms heartbeat.action.query schema.refresh.mode snapshot.delay.ms snapshot.fetch.size
slot.stream.params slot.max.retries slot.retry.delay.ms unavailable.value.placeholder
provide.transaction.metadata flush.lsn.source retriable.restart.connector.wait.ms skipped.operations
signal.data.collection signal.enabled.channels notification.enabled.channels incremental.snapshot.chunk.size
incremental.snapshot.watermarking.strategy xmin.fetch.interval.ms topic.naming.strategy topic.delimiter
topic.cache.size topic.heartbeat.prefix topic.transaction snapshot.max.threads custom.metric.tags
errors.max.retries database.query.timeout.ms signal.kafka.topic signal.kafka.groupId
signal.kafka.bootstrap.servers signal.kafka.poll.timeout.ms kafka.consumer.offset.commit.enabled
signal.consumer.security.protocol notification.sink.topic.name
""".split()


def test_docs_are_up_to_date() -> None:
    assert DOCS.read_text(encoding="utf-8") == render_markdown(), (
        "docs/configuration.md is stale: run `python -m headwater.config.docs > docs/configuration.md`"
    )


def test_every_spec_property_is_defined() -> None:
    fields = connector_fields("postgresql")
    missing = [p for p in SPEC_PROPERTIES if p not in fields and fields.dynamic_for(p) is None]
    assert missing == []
    assert len(SPEC_PROPERTIES) == 104


def test_every_field_is_documented_and_rendered() -> None:
    text = render_markdown()
    fields = connector_fields("postgresql")
    for f in fields:
        assert f"`{f.name}`" in text, f.name
        if not f.ignored_reason:
            assert f.doc, f"{f.name} has no doc"
        else:
            assert f.ignored_reason in text
    for d in fields.dynamic:
        assert d.pattern in text
    for sink_type, fs in SINK_FIELDS.items():
        assert f"### `{sink_type}`" in text
        for f in fs:
            assert f.doc


def test_docs_sections() -> None:
    text = render_markdown()
    assert "## Accepted but ignored (Kafka Connect only)" in text
    assert "## Debezium Server layout" in text
    assert "debezium.sink.type=jsonl" in text
    assert text.endswith("\n")
    # angle brackets outside code spans are escaped so Markdown does not eat them as HTML
    for line in text.splitlines():
        if line.startswith("|"):
            assert not re.search(r"<[a-z]", re.sub(r"`[^`]*`", "", line)), line
    assert len(COMMON_FIELDS) > 50
