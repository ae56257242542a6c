"""Custom converters and snapshot queries for the tests (`converters=...`, `<name>.type=helpers.custom_plugins:X`,
`snapshot.query.mode.custom.name=helpers.custom_plugins:Y`). Spark executors import this module
too (see tests/spark/test_custom_plugins.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from headwater.model.schema import Schema
from headwater.relational.converters import ConverterRegistration, RelationalColumn


class IsbnConverter:
    """Debezium's test converter (RecordsSnapshotProducerIT.CustomDatatypeConverter): `isbn`
    columns as strings with the schema name of `schema.name`."""

    def configure(self, props: dict[str, str]) -> None:
        self.schema = Schema("string", name=props.get("schema.name"))

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        if column.type_name == "isbn":
            registration.register(self.schema, lambda value: None if value is None else str(value))


class BooleanAsInt:
    """Boolean columns as int16 1/0 (the text form is 't'/'f'); NULL stays NULL."""

    def configure(self, props: dict[str, str]) -> None:
        pass

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        if column.type_name == "bool":
            registration.register(Schema("int16", name="io.example.BooleanAsInt"),
                                  lambda value: None if value is None else (1 if value == "t" else 0))


class Tagged:
    """The columns named in `columns` (`name` or `schema.table.name`) as strings `<prefix><text>`,
    with `schema.name` and the `param.<key>` properties as schema parameters; NULL becomes
    `null.text` when that is set. Records every column it is asked about in `seen` (this process)."""

    seen: ClassVar[list[RelationalColumn]] = []

    def configure(self, props: dict[str, str]) -> None:
        self.props = dict(props)
        self.columns = {c.strip() for c in props.get("columns", "").split(",") if c.strip()}
        self.prefix = props.get("prefix", "")
        self.null_text = props.get("null.text")
        params = {k[len("param."):]: v for k, v in props.items() if k.startswith("param.")}
        self.schema = Schema("string", name=props.get("schema.name"), parameters=params or None)

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        Tagged.seen.append(column)
        if column.name in self.columns or f"{column.data_collection}.{column.name}" in self.columns:
            registration.register(self.schema, self._convert)

    def _convert(self, value: Any) -> Any:
        if value is None:
            return self.null_text
        return f"{self.prefix}{value}"


class FailsOnBad:
    """Text columns; raises on the value 'bad'."""

    def configure(self, props: dict[str, str]) -> None:
        pass

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        if column.type_name == "text":
            registration.register(Schema("string", optional=True), self._convert)

    @staticmethod
    def _convert(value: Any) -> Any:
        if value == "bad":
            raise ValueError("cannot take 'bad'")
        return value


class ReturnsNone:
    """The columns named in `columns` with a required string schema, and None for every value."""

    def configure(self, props: dict[str, str]) -> None:
        self.columns = set(props.get("columns", "").split(","))

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        if column.name in self.columns:
            registration.register(Schema("string"), lambda value: None)


class RaisesInConverterFor:
    def configure(self, props: dict[str, str]) -> None:
        pass

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        raise RuntimeError("no idea what to do")


class RegistersTwice:
    def configure(self, props: dict[str, str]) -> None:
        pass

    def converter_for(self, column: RelationalColumn, registration: ConverterRegistration) -> None:
        registration.register(Schema("string"), str)
        registration.register(Schema("string"), str)


class NotAConverter:
    """Has configure but no converter_for."""

    def configure(self, props: dict[str, str]) -> None:
        pass


# -- snapshot queries ------------------------------------------------------------------------

class EvenRowsOnly:
    """Even ids only, the columns in reverse order (the result is matched by name); the table
    named in `skip.table` (configure gets the whole configuration) is not snapshotted. Records
    its calls in `calls` (this process)."""

    calls: ClassVar[list[tuple[str, list[str]]]] = []

    def configure(self, props: dict[str, str]) -> None:
        self.skip = props.get("snapshot.query.mode.custom.skip.table", "")

    def snapshot_query(self, table_id: str, columns: list[str]) -> str | None:
        EvenRowsOnly.calls.append((table_id, list(columns)))
        if self.skip and table_id.endswith(f'."{self.skip}"'):
            return None
        return f"SELECT {', '.join(reversed(columns))} FROM {table_id} WHERE id % 2 = 0"


class QueryRaises:
    def snapshot_query(self, table_id: str, columns: list[str]) -> str | None:
        raise KeyError(table_id)
