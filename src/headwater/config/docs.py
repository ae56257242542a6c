"""Render the configuration reference (docs/configuration.md) from the field definitions.

python -m headwater.config.docs > docs/configuration.md
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from headwater.config.common import COMMON_FIELDS
from headwater.config.fields import DynamicField, Field, FieldSet, FieldType, join_list
from headwater.config.registry import registered_connectors
from headwater.config.sinks import SINK_DOCS, SINK_FIELDS

GROUP_TITLES: dict[str, str] = {
    "engine": "Engine and connector identity",
    "connection": "Database connection",
    "replication": "Replication slot and publication",
    "filters": "Filters and column transformations",
    "snapshot": "Snapshots",
    "streaming": "Streaming",
    "history": "Schema changes and schema history",
    "events": "Event content and data types",
    "topics": "Topic (destination) names",
    "converter": "Converters (JSON serialization)",
    "queue": "Queue and batching",
    "offsets": "Offsets",
    "errors": "Error handling and retries",
    "heartbeat": "Heartbeats",
    "signals": "Signals and notifications",
    "metrics": "Monitoring",
}

SERVER_EXAMPLE = """\
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.database.hostname=localhost
debezium.source.database.port=5432
debezium.source.database.user=postgres
debezium.source.database.password=postgres
debezium.source.database.dbname=inventory
debezium.source.topic.prefix=fulfillment
debezium.source.table.include.list=public.orders,public.customers
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.sink.type=jsonl
debezium.sink.jsonl.path=data/events.jsonl
debezium.format.value=json
debezium.format.value.schemas.enable=false
"""


def _cell(text: str) -> str:
    """Plain table-cell text: escape pipes and angle brackets (which Markdown takes for HTML)."""
    return _code(text).replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Text inside a code span in a table cell: only pipes need escaping."""
    return text.replace("|", "\\|").replace("\n", " ")


def _default(f: Field) -> str:
    if f.default_doc is not None:
        return _cell(f.default_doc)
    d: Any = f.default
    if d is None:
        return "—"
    if isinstance(d, bool):
        return "`true`" if d else "`false`"
    if isinstance(d, list | tuple):
        return f"`{_code(join_list(d))}`" if d else "empty"
    return f"`{_code(str(d))}`"


def _type(f: Field) -> str:
    if f.type is FieldType.ENUM:
        return "enum"
    return f.type.value


def _description(f: Field) -> str:
    parts = [f.doc]
    if f.type is FieldType.ENUM:
        parts.append("Allowed: " + ", ".join(f"`{a}`" for a in f.allowed) + ".")
        for alias, target in f.aliases.items():
            parts.append(f"`{alias}` is a deprecated alias of `{target}`.")
    if f.deprecated_names:
        parts.append("Deprecated name(s): " + ", ".join(f"`{n}`" for n in f.deprecated_names) + ".")
    return _cell(" ".join(p for p in parts if p))


def _field_table(fields: Iterable[Field], notes: dict[str, str] | None = None) -> list[str]:
    lines = ["| Property | Type | Default | Description |", "|---|---|---|---|"]
    for f in fields:
        name = f"`{f.name}`" + (" **(required)**" if f.required else "")
        note = (notes or {}).get(f.name)
        description = _description(f) + (f" {_cell(note)}" if note else "")
        lines.append(f"| {name} | {_type(f)} | {_default(f)} | {description} |")
    return lines


def _dynamic_table(dynamic: Iterable[DynamicField]) -> list[str]:
    lines = ["| Property pattern | Type | Description |", "|---|---|---|"]
    for d in dynamic:
        lines.append(f"| `{_code(d.pattern)}` | {d.type.value} | {_cell(d.doc)} |")
    return lines


def _grouped(fields: Iterable[Field], dynamic_fields: Iterable[DynamicField], heading: str,
             notes: dict[str, str] | None = None) -> list[str]:
    active = [f for f in fields if not f.ignored_reason]
    groups: dict[str, list[Field]] = {}
    for f in active:
        groups.setdefault(f.group, []).append(f)
    order = [g for g in GROUP_TITLES if g in groups] + sorted(g for g in groups if g not in GROUP_TITLES)
    out: list[str] = []
    for g in order:
        out += ["", f"{heading} {GROUP_TITLES.get(g, g.capitalize())}", "", *_field_table(groups[g], notes)]
    dynamic = [d for d in dynamic_fields if not d.ignored_reason]
    if dynamic:
        out += [
            "",
            f"{heading} Families of properties",
            "",
            "Properties whose names carry a parameter; several of each may be set.",
            "",
            *_dynamic_table(dynamic),
        ]
    return out


def _ignored(fieldsets: dict[str, FieldSet]) -> list[str]:
    """One row per (property, reason); the connectors it applies to when not all of them."""
    rows: dict[tuple[str, str], list[str]] = {}
    for key, fs in fieldsets.items():
        for f in fs:
            if f.ignored_reason:
                rows.setdefault((f.name, f.ignored_reason), []).append(key)
        for d in fs.dynamic:
            if d.ignored_reason:
                rows.setdefault((d.pattern, d.ignored_reason), []).append(key)
    if len(fieldsets) == 1:
        lines = ["| Property | Why it is ignored |", "|---|---|"]
        return lines + [f"| `{_code(name)}` | {_cell(reason)} |" for name, reason in rows]
    lines = ["| Property | Connectors | Why it is ignored |", "|---|---|---|"]
    for (name, reason), keys in rows.items():
        which = "all" if len(keys) == len(fieldsets) else ", ".join(f"`{k}`" for k in keys)
        lines.append(f"| `{_code(name)}` | {which} | {_cell(reason)} |")
    return lines


def _shared(fieldsets: list[FieldSet]) -> tuple[list[Field], list[DynamicField]]:
    """The definitions every connector has (the same objects: the relational fields they share)."""
    first, rest = fieldsets[0], fieldsets[1:]
    fields = [f for f in first if all(fs.get(f.name) is f for fs in rest)]
    dynamic = [d for d in first.dynamic if all(any(x is d for x in fs.dynamic) for fs in rest)]
    return fields, dynamic


def _redefined(connectors: dict[str, Any]) -> dict[str, str]:
    """Common property -> a note naming the connectors that define it their own way."""
    by_name: dict[str, list[str]] = {}
    for key, entry in connectors.items():
        for f in entry.fields:
            if f.replaces and f.name in COMMON_FIELDS:
                by_name.setdefault(f.name, []).append(key)
    return {name: "Connector " + ", ".join(f"`{k}`" for k in keys) + " defines it its own way (see its section)."
            for name, keys in by_name.items()}


def render_markdown() -> str:
    """The whole configuration reference as Markdown (deterministic)."""
    connectors = registered_connectors()
    out: list[str] = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m headwater.config.docs > docs/configuration.md`; do not edit. -->",
        "",
        "Headwater takes Debezium's property names, defaults and validation rules. A configuration "
        "file may be a Java `.properties` file, a Kafka Connect JSON document "
        '(`{"name": ..., "config": {...}}`) or a flat JSON object, a YAML mapping (nested keys are '
        "joined with dots), or a Debezium Server `application.properties` file (see the end of this "
        "page). Values are strings in every format; lists are comma-separated (write `\\,` for a "
        "literal comma). Every problem is reported at once; unknown properties are errors (with a "
        '"did you mean" hint), and passwords are never printed.',
        "",
        "Override any property on the command line with `KEY=VALUE` (keys starting with `debezium.` "
        "are routed as in a Debezium Server file).",
        "",
        "## Common properties",
        "",
        "These apply to every connector (a connector section may define one of them its own way).",
        *_grouped(COMMON_FIELDS, COMMON_FIELDS.dynamic, "###", _redefined(connectors)),
    ]
    shared_fields: list[Field] = []
    shared_dynamic: list[DynamicField] = []
    if len(connectors) > 1:
        shared_fields, shared_dynamic = _shared([e.fields for e in connectors.values()])
        names = ", ".join(f"`{k}`" for k in connectors)
        out += [
            "",
            "## Properties of every database connector",
            "",
            f"These apply to every connector ({names}) in the same way; a connector's section adds its own.",
            *_grouped(shared_fields, shared_dynamic, "###"),
        ]
    for key, entry in connectors.items():
        classes = ", ".join(f"`{c}`" for c in entry.class_names)
        own = [f for f in entry.fields if not any(f is s for s in shared_fields)]
        own_dynamic = [d for d in entry.fields.dynamic if not any(d is s for s in shared_dynamic)]
        out += [
            "",
            f"## Connector `{key}`",
            "",
            f"Selected by `connector.class` = {classes}.",
            *_grouped(own, own_dynamic, "###"),
        ]
    out += [
        "",
        "## Accepted but ignored (Kafka Connect only)",
        "",
        "These properties are accepted so that existing Debezium configurations load unchanged; each "
        "one that is set produces a warning.",
        "",
        *_ignored({key: COMMON_FIELDS.merge(e.fields) for key, e in connectors.items()}),
        "",
        "## Sinks",
        "",
        "The standalone runner writes to a sink chosen by `debezium.sink.type`; its properties are "
        "`debezium.sink.<type>.<property>`.",
    ]
    for sink_type, fields in SINK_FIELDS.items():
        out += ["", f"### `{sink_type}`", ""]
        if SINK_DOCS.get(sink_type):
            out += [SINK_DOCS[sink_type], ""]
        out += _field_table(fields)
    out += [
        "",
        "## Debezium Server layout",
        "",
        "A file in which keys start with `debezium.` is read as a Debezium Server `application.properties` file:",
        "",
        "| Key | Meaning |",
        "|---|---|",
        "| `debezium.source.<property>` | connector property `<property>` |",
        "| `debezium.sink.type` | the sink type |",
        "| `debezium.sink.<type>.<property>` | sink property (only the selected type's are used) |",
        "| `debezium.format.key`, `debezium.format.value`, `debezium.format.header` | output format (`json` only) |",
        "| `debezium.format.key.<option>` (also `value`, `header`) | converter property "
        "`key.converter.<option>`, e.g. `schemas.enable` |",
        "| other `debezium.*` keys (e.g. `debezium.transforms`) | kept aside, with a warning |",
        "| keys not starting with `debezium.` (e.g. `quarkus.log.level`) | ignored, with a warning |",
        "",
        "Example:",
        "",
        "```properties",
        *SERVER_EXAMPLE.rstrip("\n").split("\n"),
        "```",
        "",
    ]
    return "\n".join(out)


def main() -> None:
    sys.stdout.write(render_markdown())


if __name__ == "__main__":
    main()
