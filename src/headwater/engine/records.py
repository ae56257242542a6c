"""What flows from a connector to a destination: records, and offset-only markers."""

from __future__ import annotations

from typing import Any

from headwater.model.schema import Schema


class SourceRecord:
    """One change event as Kafka Connect would hold it: topic, key and value with their schemas,
    extra headers (the converter adds the context headers), and the connector offset that is
    safe to store once this record and all before it are durably written."""

    __slots__ = ("context_headers", "headers", "key", "key_schema", "offset", "op", "table", "topic", "value",
                 "value_schema")

    def __init__(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema | None,
                 value: Any, offset: dict[str, Any], headers: tuple[tuple[str, Schema, Any], ...] = (),
                 op: str | None = None, table: str | None = None, context_headers: bool = True) -> None:
        self.topic = topic
        self.key_schema = key_schema
        self.key = key
        self.value_schema = value_schema
        self.value = value
        self.offset = offset
        self.headers = headers
        self.op = op          # op code for consumers and metrics; None for tombstones/metadata
        self.table = table    # data collection id ("schema.table"), when the record is about one
        # Debezium adds its __debezium.context.* headers to data-change records (and their
        # tombstones) only, not to transaction metadata or logical-decoding messages.
        self.context_headers = context_headers

    def __repr__(self) -> str:
        return f"SourceRecord(topic={self.topic!r}, op={self.op!r}, key={self.key!r})"


class OffsetMarker:
    """A position the connector has fully processed without emitting a record for it (a commit,
    a filtered transaction). Storing it lets restarts skip work and lets the database free WAL.

    `idle`: a position the stream reached with nothing to deliver (the source's latest position
    while idle), which the database may take as acknowledged without being told (PostgreSQL's
    client library does): the coordinator stores it at once when no records await storing,
    rather than at the next offset.flush.interval.ms, so the stored offset does not stay behind."""

    __slots__ = ("idle", "offset")

    def __init__(self, offset: dict[str, Any], idle: bool = False) -> None:
        self.offset = offset
        self.idle = idle

    def __repr__(self) -> str:
        return f"OffsetMarker({self.offset!r}{', idle' if self.idle else ''})"


class EncodedBatch:
    """Records already serialized (by a worker process): runs of lines per topic, in order, and
    the offset after the last of them."""

    __slots__ = ("offset", "segments", "written")

    def __init__(self, segments: list[tuple[str, int, bytes]], offset: dict[str, Any] | None,
                 written: bool = False) -> None:
        self.segments = segments  # (topic, number of lines, the lines)
        self.offset = offset
        self.written = written    # the worker already appended the lines to the sink's files

    @property
    def records(self) -> int:
        return sum(n for _, n, _ in self.segments)


class PendingBatch:
    """An EncodedBatch being produced elsewhere; `result()` waits for it. `weight` is the number
    of messages it covers, which is what it counts for in the queue's bound."""

    __slots__ = ("future", "weight")

    def __init__(self, future: Any, weight: int = 1) -> None:
        self.future = future
        self.weight = weight

    def result(self) -> EncodedBatch:
        return self.future.result()
