"""SQL Server's column catalog -> `relational.table.Column`, described as Debezium sees it.

Debezium builds its tables from mssql-jdbc's `DatabaseMetaData.getColumns`: the JDBC type, the
type name (`int identity` for identity columns), COLUMN_SIZE as the length and DECIMAL_DIGITS as
the scale. Headwater reads the same facts from the `sys` catalog views in one query per database
and derives getColumns' numbers from them (checked against mssql-jdbc through the emulator:
tests/connectors/sqlserver/test_types_columns.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.relational.table import Column

# java.sql.Types and microsoft.sql.Types constants as mssql-jdbc reports them per base type
JDBC_TYPES: dict[str, int] = {
    "bit": -7, "tinyint": -6, "smallint": 5, "int": 4, "bigint": -5,
    "real": 7, "float": 8, "decimal": 3, "numeric": 2, "money": 3, "smallmoney": 3,
    "char": 1, "varchar": 12, "text": -1, "nchar": -15, "nvarchar": -9, "ntext": -16, "xml": -16,
    "uniqueidentifier": 1, "date": 91, "time": 92, "datetime": 93, "smalldatetime": 93, "datetime2": 93,
    "datetimeoffset": -155, "binary": -2, "varbinary": -3, "image": -4, "timestamp": -2,
    "sql_variant": -150, "hierarchyid": -3, "geometry": -157, "geography": -158, "sysname": -9,
}

# getColumns' COLUMN_SIZE for (max) columns and the LOB types, whatever sys.columns.max_length says
_MAX_SIZE = 2_147_483_647
_LOB_SIZES = {"text": _MAX_SIZE, "image": _MAX_SIZE, "xml": _MAX_SIZE, "ntext": 1_073_741_823,
              "geometry": _MAX_SIZE, "geography": _MAX_SIZE}
# types whose size and scale are sys.columns' precision and scale (DECIMAL_DIGITS reported)
_PRECISION_SCALE = frozenset({"bit", "tinyint", "smallint", "int", "bigint", "decimal", "numeric", "money",
                              "smallmoney", "time", "datetime", "smalldatetime", "datetime2", "datetimeoffset"})
_NATIONAL = frozenset({"nchar", "nvarchar", "sysname"})


@dataclass(frozen=True)
class CatalogColumn:
    """One row of `columns_query`."""

    schema: str
    table: str
    name: str
    ordinal: int                  # 1-based among the table's live columns, in sys.columns.column_id order
    type_name: str                # base type (alias types resolved), lower case; rowversion is "timestamp"
    max_length: int               # sys.columns.max_length: bytes, -1 for (max)
    precision: int
    scale: int
    nullable: bool
    default_definition: str | None   # sys.default_constraints.definition, e.g. "((0))", "(N'x')"
    identity: bool
    computed: bool
    collation: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> CatalogColumn:
        """A row of `columns_query` as the driver returns it."""
        (schema, table, name, ordinal, type_name, max_length, precision, scale, nullable, default,
         identity, computed, collation) = row
        return cls(schema, table, name, int(ordinal), str(type_name).lower(), int(max_length), int(precision),
                   int(scale), bool(nullable), default, bool(identity), bool(computed), collation)


def quote_name(name: str) -> str:
    """A T-SQL delimited identifier ([name], with `]` doubled)."""
    return "[" + name.replace("]", "]]") + "]"


def columns_query(database: str) -> str:
    """T-SQL returning `CatalogColumn` fields, in order, for every column of every user table of
    `database`, ordered by schema, table and column. Alias types resolve to their system base
    type; CLR types (geometry, geography, hierarchyid) and user CLR types keep their own name."""
    db = quote_name(database)
    return (
        "SELECT s.name, t.name, c.name, "
        "ROW_NUMBER() OVER (PARTITION BY c.object_id ORDER BY c.column_id), "
        "COALESCE(CASE WHEN ty.is_user_defined = 0 THEN ty.name END, bt.name, ty.name), "
        "c.max_length, c.precision, c.scale, c.is_nullable, dc.definition, c.is_identity, c.is_computed, "
        "c.collation_name "
        f"FROM {db}.sys.columns c "
        f"JOIN {db}.sys.tables t ON t.object_id = c.object_id "
        f"JOIN {db}.sys.schemas s ON s.schema_id = t.schema_id "
        f"JOIN {db}.sys.types ty ON ty.user_type_id = c.user_type_id "
        f"LEFT JOIN {db}.sys.types bt ON bt.user_type_id = ty.system_type_id "
        f"LEFT JOIN {db}.sys.default_constraints dc ON dc.object_id = c.default_object_id "
        "WHERE t.is_ms_shipped = 0 "
        "ORDER BY s.name, t.name, c.column_id"
    )


def column_size(c: CatalogColumn) -> int:
    """getColumns' COLUMN_SIZE (Debezium's column length)."""
    name = c.type_name
    if name in _PRECISION_SCALE or name in ("real", "float"):
        return c.precision
    if name in _LOB_SIZES:
        return _LOB_SIZES[name]
    if name == "date":
        return 10
    if name == "uniqueidentifier":
        return 36
    if c.max_length == -1:
        return _MAX_SIZE
    if name in _NATIONAL:
        return c.max_length // 2
    if name == "sql_variant":
        return 8000
    return c.max_length  # char, varchar, binary, varbinary, timestamp, hierarchyid


def decimal_digits(c: CatalogColumn) -> int | None:
    """getColumns' DECIMAL_DIGITS (Debezium's column scale); None where it is null."""
    return c.scale if c.type_name in _PRECISION_SCALE else None


def debezium_type_name(c: CatalogColumn) -> str:
    """getColumns' TYPE_NAME: the type, with ` identity` for identity columns."""
    return f"{c.type_name} identity" if c.identity else c.type_name


def column_from_catalog(c: CatalogColumn) -> Column:
    """The relational column: Debezium's type name, length and scale; the default expression as
    SQL Server stores it; the catalog row as `native` (the value converters read it)."""
    return Column(
        name=c.name,
        position=c.ordinal,
        type_name=debezium_type_name(c),
        type_oid=-1,                     # Debezium leaves nativeType unset for SQL Server
        length=column_size(c),
        scale=decimal_digits(c),
        optional=c.nullable,
        default_expression=c.default_definition,
        generated=c.computed,
        native=c,
    )
