"""Table and column metadata, independent of any database."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TableId:
    """A table's identity: (catalog, schema, table). Orders like Debezium's TableId."""

    catalog: str | None
    schema: str | None
    table: str

    def identifier(self) -> str:
        """`schema.table` (Debezium's data-collection id for schema-qualified databases)."""
        return f"{self.schema}.{self.table}" if self.schema is not None else self.table

    def __str__(self) -> str:
        return self.identifier()

    def sort_key(self) -> tuple[str, str, str]:
        return (self.catalog or "", self.schema or "", self.table)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    position: int                    # 1-based ordinal among the table's live columns
    type_name: str                   # the database's type name, e.g. "int4", "varchar", "_text"
    type_oid: int = 0
    type_modifier: int = -1
    length: int | None = None        # varchar(n) / bit(n) / precision for numeric
    scale: int | None = None
    optional: bool = True
    default_expression: str | None = None
    generated: bool = False
    native: Any = None               # connector-specific type details (opaque here)


@dataclass(frozen=True, slots=True)
class Table:
    id: TableId
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    # connector-specific details, e.g. PostgreSQL's replica identity and relkind
    attributes: dict[str, Any] = field(default_factory=dict)

    def column(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]
