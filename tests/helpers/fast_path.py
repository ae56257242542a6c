"""The encoding workers' two ways of building a chunk side by side: the general path and the fast path
(headwater.connectors.postgres.fast_events), for one configuration, on pgoutput messages of a real server
cut into chunks as the streaming reader cuts them. The fast path's tests compare their bytes;
bench/worker_encode.py times them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headwater import config as cfg
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.connectors.postgres.events import (
    RELATION,
    ChangeEventBuilder,
    Chunk,
    ChunkBuilder,
    StreamPosition,
    advance_position,
)
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.standalone import serializer_settings


def workload_messages(db: Any, tables: str, workload: str, publication: str, prefix: str) -> list[tuple[bytes, int]]:
    """Create `tables` (and their publication), run `workload` (statements separated by ";\n") after
    a new slot, and return the pgoutput messages the slot holds for it (peeked: the slot is dropped
    after, nothing consumed)."""
    import uuid

    slot = f"{prefix}_{uuid.uuid4().hex[:8]}"
    db.execute(tables)
    db.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    for statement in workload.strip().split(";\n"):
        db.execute(statement)
    rows = db.execute(
        f"SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('{slot}', NULL, NULL, "
        f"'proto_version', '1', 'publication_names', '{publication}', 'messages', 'true')")
    db.execute(f"SELECT pg_drop_replication_slot('{slot}')")
    assert rows
    return peeked(rows)


def peeked(rows: Iterable[tuple[str, Any]]) -> list[tuple[bytes, int]]:
    """(payload, LSN) of the rows ``lsn::text, data`` of ``pg_logical_slot_peek_binary_changes``."""
    out = []
    for lsn, data in rows:
        hi, lo = lsn.split("/")
        out.append((bytes(data), (int(hi, 16) << 32) | int(lo, 16)))
    return out


class TwoPaths:
    """A builder and a serializer per path, for the connector `properties` (debezium.source.* without the
    prefix) describe."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.config = cfg.from_properties(properties)
        self.connector = PostgresConnector(self.config.connector)
        self.settings = self.connector.builder_settings()
        serializers = serializer_settings(self.config, self.connector)
        self.general, self.fast = ChunkBuilder(self.settings), ChunkBuilder(self.settings)
        self.general_ser, self.fast_ser = serializers.create(in_place=True), serializers.create(in_place=True)
        self.fast.render_with(self.fast_ser)

    def paths(self) -> list[tuple[str, ChunkBuilder, Any]]:
        """(name, builder, serializer) of the general path, then of the fast path."""
        return [("general", self.general, self.general_ser), ("fast", self.fast, self.fast_ser)]

    def chunks(self, conn: Any, messages: list[tuple[bytes, int]], size: int) -> list[Chunk]:
        """`messages` in chunks of at most `size`, as the streaming reader cuts them: a relation message is
        handled between chunks (`conn` reads the catalog for it)."""
        registry = self.settings.registry(CatalogReader(conn))
        position = StreamPosition()
        reader = ChangeEventBuilder(self.settings, registry, position, lambda _: None)
        chunks: list[Chunk] = []
        pending: list[tuple[bytes, int]] = []
        start: StreamPosition | None = None

        def cut() -> None:
            nonlocal pending, start
            if pending:
                assert start is not None  # set with the first pending message
                oids = {int.from_bytes(p[1:5], "big") for p, _ in pending if p[0] in b"IUD"}
                chunks.append(Chunk(start, pending, {oid: registry.definition(oid) for oid in oids}))
            pending, start = [], None

        for payload, lsn in messages:
            if payload[0] == RELATION:
                cut()
                reader.handle(payload, lsn)
                continue
            if start is None:
                start = StreamPosition(**vars(position))
            advance_position(position, payload, lsn)
            pending.append((payload, lsn))
            if len(pending) >= size:
                cut()
        cut()
        return chunks
