"""SQL Server data types as the emulator describes them: a name and its length, precision and scale.

One ``SqlType`` describes a column of a table, a column of a result set, an RPC parameter or the
base type inside a ``sql_variant``. The TDS layer turns it into TYPE_INFO; the SQL layer stores it
in the backing PostgreSQL's registry (see DESIGN.md, "Backing store").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX = -1  # max_length of varchar(max), nvarchar(max), varbinary(max)

# max_length in bytes as sys.columns reports it, for the types whose length is fixed
FIXED_LENGTH = {
    "bit": 1, "tinyint": 1, "smallint": 2, "int": 4, "bigint": 8,
    "real": 4, "float": 8, "money": 8, "smallmoney": 4,
    "date": 3, "datetime": 8, "smalldatetime": 4,
    "uniqueidentifier": 16, "text": 16, "ntext": 16, "image": 16, "xml": -1,
    "sql_variant": 8016, "timestamp": 8, "rowversion": 8,
}
STRING_TYPES = frozenset({"char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml"})
UNICODE_TYPES = frozenset({"nchar", "nvarchar", "ntext", "xml"})
BINARY_TYPES = frozenset({"binary", "varbinary", "image", "timestamp", "rowversion"})
SCALED_TIME_TYPES = frozenset({"time", "datetime2", "datetimeoffset"})
DECIMAL_TYPES = frozenset({"decimal", "numeric"})

_SPEC = re.compile(r"^\s*([a-z_0-9]+)\s*(?:\(\s*(max|\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SqlType:
    """A SQL Server type. ``length`` is the declared length in characters (char types) or bytes
    (binary types), ``MAX`` for ``(max)``; ``precision``/``scale`` for decimal/numeric, ``scale``
    (fractional-second digits, 0-7) for time, datetime2 and datetimeoffset."""

    name: str
    length: int | None = None
    precision: int | None = None
    scale: int | None = None

    @classmethod
    def parse(cls, spec: str) -> SqlType:
        """``SqlType.parse("nvarchar(50)")``, ``"decimal(10,2)"``, ``"datetime2"`` (scale 7)."""
        m = _SPEC.match(spec)
        if not m:
            raise ValueError(f"not a SQL Server type: {spec!r}")
        name, first, second = m.group(1).lower(), m.group(2), m.group(3)
        if name == "rowversion":
            name = "timestamp"
        if name in DECIMAL_TYPES:
            precision = int(first) if first else 18
            return cls(name, precision=precision, scale=int(second) if second else 0)
        if name in SCALED_TIME_TYPES:
            return cls(name, scale=7 if first is None else int(first))
        if name in ("char", "varchar", "nchar", "nvarchar", "binary", "varbinary"):
            length = 1 if first is None else (MAX if first.lower() == "max" else int(first))
            return cls(name, length=length)
        if name == "float":
            bits = int(first) if first else 53
            return cls("real") if bits <= 24 else cls("float")
        if first is not None:
            raise ValueError(f"{name} takes no length: {spec!r}")
        return cls(name)

    @property
    def max_length(self) -> int:
        """Length in bytes, as ``sys.columns.max_length`` reports it (-1 for max)."""
        if self.name in FIXED_LENGTH:
            return FIXED_LENGTH[self.name]
        if self.name in DECIMAL_TYPES:
            p = self.precision or 18
            return 5 if p <= 9 else 9 if p <= 19 else 13 if p <= 28 else 17
        if self.name == "time":
            return 3 if self.scale <= 2 else 4 if self.scale <= 4 else 5
        if self.name == "datetime2":
            return 6 if self.scale <= 2 else 7 if self.scale <= 4 else 8
        if self.name == "datetimeoffset":
            return 8 if self.scale <= 2 else 9 if self.scale <= 4 else 10
        if self.length == MAX:
            return MAX
        if self.name in ("nchar", "nvarchar"):
            return 2 * (self.length or 1)
        return self.length or 1

    def __str__(self) -> str:
        if self.name in DECIMAL_TYPES:
            return f"{self.name}({self.precision},{self.scale})"
        if self.name in SCALED_TIME_TYPES:
            return f"{self.name}({self.scale})"
        if self.length is not None:
            return f"{self.name}({'max' if self.length == MAX else self.length})"
        return self.name
