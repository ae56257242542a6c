"""Plain row changes rendered straight to their converter output, in worker processes.

The general path builds a record per row (key, envelope, source block and offset as dicts), and
the JSON converter then serializes all of it; most of that work renders parts that are the same
for every row of a table within a transaction — the schemas, the envelope's structure, the
source block but for its LSN. Here those parts are rendered once, through the same converters,
into byte fragments, and a row costs its decoded tuple, its converted row (the table's own
`row()`, so column mappers and custom converters apply as usual), one `orjson.dumps` of the row
and one of the key, and the LSN and clock written between the fragments.

Only the common shape takes this way: an INSERT, or an UPDATE without an old tuple (so its key
did not change), of a captured table, with no transaction metadata and no incremental-snapshot
key tracking. Anything else — and any row whose conversion raises — returns False and goes
through the general path, which keeps its exact handling and errors. A table's fragments are
checked once per worker against the general path on its first row (same clock); if they ever
differ the table stays on the general path.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import orjson

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.schemas import CapturedTable
from headwater.model.envelope import OP_CREATE, OP_UPDATE
from headwater.serialization.json import ENVELOPE_START, EncodedLines, RecordSerializer

log = logging.getLogger(__name__)

_INSERT, _UPDATE, _NEW = ord("I"), ord("U"), ord("N")
_decode_tuple = pg.decode_tuple
# stand-ins rendered into the fragments where per-row values go (digits only: rendered as-is)
_LSN_MARK = 987654321987654321
_NOW_MARK = 8765432109876543210
_AFTER_MARK = "\x00headwater-after\x00"
_SOURCE_MARK = "\x00headwater-source\x00"


def _split(text: bytes, marks: list[bytes]) -> list[bytes] | None:
    """`text` cut at each of `marks` in turn (each must occur exactly where expected, once)."""
    pieces: list[bytes] = []
    rest = text
    for mark in marks:
        at = rest.find(mark)
        if at < 0:
            return None
        pieces.append(rest[:at])
        rest = rest[at + len(mark):]
    pieces.append(rest)
    return pieces


class _Plan:
    """One table version's fragments for one operation."""

    __slots__ = ("after_adapter", "captured", "head", "key", "key_adapter", "key_dumps", "mid", "op", "row",
                 "source", "source_key", "tail", "topic", "verified")

    def __init__(self, captured: CapturedTable, op: str) -> None:
        self.captured = captured
        self.op = op
        self.topic = captured.topic
        self.row = captured.schema.row
        self.key = captured.schema.key
        self.head = b""
        self.mid = b""
        self.tail: tuple[bytes, bytes, bytes, bytes, bytes] = (b"", b"", b"", b"", b"")
        self.key_adapter: Callable[[Any], Any] | None = None
        self.after_adapter: Callable[[Any], Any] | None = None
        self.key_dumps = True
        self.source_key: tuple[Any, ...] | None = None
        self.source: tuple[bytes, bytes, bytes] = (b"", b"", b"")
        self.verified: bool | None = None  # None: not yet compared with the general path


class FastRows:
    """Renders the plain rows of a chunk into `EncodedLines` runs (see the module doc)."""

    def __init__(self, serializer: RecordSerializer) -> None:
        self.serializer = serializer
        self._plans: dict[tuple[int, int], _Plan] = {}
        self._builder: Any = None
        self._items: list[Any] = []

    def start(self, builder: Any, items: list[Any]) -> bool:
        """Begin a chunk built by `builder` (a ChangeEventBuilder emitting into `items`); False
        when its settings leave nothing to this path."""
        settings = builder.settings
        if settings.provide_transaction_metadata or builder.dispatcher.on_streamed_key is not None:
            return False
        self._builder = builder
        self._items = items
        return True

    def finish(self) -> None:
        """End the chunk: let go of its builder and items."""
        self._builder = None
        self._items = []

    # -- one message ------------------------------------------------------------------------

    def handle(self, payload: bytes, lsn: int) -> bool:
        """Emit the record of an INSERT/UPDATE message; False to leave it to the general path."""
        kind = payload[0]
        if (kind != _INSERT and kind != _UPDATE) or payload[5] != _NEW:
            return False
        oid = int.from_bytes(payload[1:5], "big")
        builder = self._builder
        captured = builder.registry.get(oid)
        if captured is None:
            return False
        plan = self._plans.get((oid, kind))
        if plan is None or plan.captured is not captured:
            plan = self._plan(oid, captured, kind)
        if plan.verified is False:
            return False
        pos = builder.position
        try:
            values, end = _decode_tuple(payload, 6)
            if end != len(payload):
                return False
            row = plan.row(values)
            if plan.verified is None and not self._verify(plan, payload, lsn, values):
                return False
            parts = self._render(plan, row, lsn, builder.dispatcher._clock())
        except Exception:  # the general path reports it per event.processing.failure.handling.mode
            return False
        if not pos.data():
            return True  # delivered before a restart (the general path skips it the same way)
        done = pos.tx_msgs
        builder._msgs_done = done
        items = self._items
        run = items[-1] if items else None
        if type(run) is not EncodedLines or run.topic is not plan.topic:
            run = EncodedLines(plan.topic, copy.copy(pos))
            items.append(run)
        run.parts += parts
        run.count += 1
        run.lsn = lsn
        run.msgs = done
        return True

    def _render(self, plan: _Plan, row: dict[str, Any], lsn: int, now: int) -> tuple[bytes, ...]:
        key = plan.key(row)
        if plan.key_adapter is not None:
            key = plan.key_adapter(key)
        if plan.after_adapter is not None:
            row = plan.after_adapter(row)
        pos = self._builder.position
        source_key = (pos.xid, pos.commit_ts_us, pos.last_commit_lsn, pos.xmin)
        if plan.source_key != source_key:
            self._source_fragments(plan, source_key)
        s0, s1, s2 = plan.source
        t0, t1, t2, t3, t4 = plan.tail
        lsn_b = b"%d" % lsn
        return (plan.head, orjson.dumps(key) if plan.key_dumps else b"null", plan.mid, orjson.dumps(row), t0,
                s0, lsn_b, s1, lsn_b, s2, t1, b"%d" % (now // 1_000_000), t2, b"%d" % (now // 1_000), t3,
                b"%d" % now, t4)

    # -- fragments ----------------------------------------------------------------------------

    def _plan(self, oid: int, captured: CapturedTable, kind: int) -> _Plan:
        plan = _Plan(captured, OP_CREATE if kind == _INSERT else OP_UPDATE)
        self._plans[(oid, kind)] = plan
        return self._fragments(plan)

    def _fragments(self, plan: _Plan) -> _Plan:
        builder = self._builder
        op = plan.op
        if op in builder.settings.skipped_operations:
            return self._refuse(plan, f"operation {op!r} is skipped")
        captured = plan.captured
        schema = captured.schema
        ser = self.serializer
        keys, values = ser.key_converter, ser.value_converter
        try:
            plan.key_dumps = schema.key_schema is not None
            plan.key_adapter = keys._adapter(schema.key_schema) if schema.key_schema is not None else None
            envelope = schema.envelope_schema
            after_field = envelope.field("after")
            assert after_field is not None
            plan.after_adapter = values._adapter(after_field.schema)
            head = [b'{"topic":', orjson.dumps(captured.topic), b',"key":']
            if schema.key_schema is not None and keys.schemas_enable:
                head += (ENVELOPE_START, keys.schema_text(schema.key_schema), b',"payload":')
            plan.head = b"".join(head)
            # the envelope around `after` and `source`, through the dispatcher and the converter
            dispatcher = builder.dispatcher
            clock = dispatcher._clock
            dispatcher._clock = lambda: _NOW_MARK
            try:
                env = dispatcher._envelope(None, None, {}, op)
            finally:
                dispatcher._clock = clock
            adapter = values._adapter(envelope)
            env = adapter(env) if adapter is not None else env
            env = dict(env)
            env["after"] = _AFTER_MARK
            env["source"] = _SOURCE_MARK
            body = orjson.dumps(env)
            pieces = _split(body, [orjson.dumps(_AFTER_MARK), orjson.dumps(_SOURCE_MARK),
                                   b"%d" % (_NOW_MARK // 1_000_000), b"%d" % (_NOW_MARK // 1_000),
                                   b"%d" % _NOW_MARK])
            if pieces is None:
                return self._refuse(plan, "the envelope's layout is not the expected one")
            before_after, t0, t1, t2, t3, t4 = pieces
            close_key = b"}" if schema.key_schema is not None and keys.schemas_enable else b""
            value_start = ENVELOPE_START + values.schema_text(envelope) + b',"payload":' if values.schemas_enable \
                else b""
            plan.mid = close_key + b',"value":' + value_start + before_after
            close_value = b"}" if values.schemas_enable else b""
            headers = ser.headers_json(_NO_HEADERS)
            plan.tail = (t0, t1, t2, t3, t4 + close_value + b',"headers":' + headers + b"}\n")
        except Exception as exc:  # any surprise leaves the table to the general path
            return self._refuse(plan, f"{type(exc).__name__}: {exc}")
        return plan

    def _refuse(self, plan: _Plan, why: str) -> _Plan:
        log.debug("table %s stays on the general path: %s", plan.captured.collection, why)
        plan.verified = False
        return plan

    def _source_fragments(self, plan: _Plan, source_key: tuple[Any, ...]) -> None:
        block = self._builder._source(plan.captured, _LSN_MARK)
        source_field = plan.captured.schema.envelope_schema.field("source")
        assert source_field is not None
        adapter = self.serializer.value_converter._adapter(source_field.schema)
        if adapter is not None:
            block = adapter(block)
        mark = b"%d" % _LSN_MARK
        text = orjson.dumps(block)
        if text.count(mark) != 2:
            raise ValueError("the source block's layout is not the expected one")
        pieces = _split(text, [mark, mark])
        assert pieces is not None
        plan.source = (pieces[0], pieces[1], pieces[2])
        plan.source_key = source_key

    def _verify(self, plan: _Plan, payload: bytes, lsn: int, values: list[Any]) -> bool:
        """Render the first row of a table both ways, with the same clock, and keep this path
        for the table only if the bytes are the same."""
        from headwater.connectors.postgres.events import ChangeEventBuilder

        builder = self._builder
        now = builder.dispatcher._clock()
        scratch: list[Any] = []
        general = ChangeEventBuilder(builder.settings, builder.registry, copy.copy(builder.position), scratch.append)
        general.dispatcher._clock = lambda: now
        general.position.skipping = 0
        general.handle(payload, lsn)
        general.dispatcher = None  # type: ignore[assignment]  # (a reference cycle, see ChunkBuilder.build)
        expected = b"".join(self.serializer.line(r) for r in scratch if hasattr(r, "topic"))
        fast = b"".join(self._render(plan, plan.row(_decode_tuple(payload, 6)[0]), lsn, now))
        plan.verified = fast == expected
        if not plan.verified:
            log.warning("table %s: fast rendering differs from the general path; using the general path "
                        "(please report this)", plan.captured.collection)
        return plan.verified


class _NoHeaders:
    """A record without headers of its own that gets the context headers (a data change)."""

    headers: tuple[Any, ...] = ()
    context_headers = True


_NO_HEADERS: Any = _NoHeaders()
