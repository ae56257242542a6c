"""Multi-dimensional arrays and explicit bounds in PostgreSQL's text form (both paths read it).
Expected values are what Debezium 3.6.3 emitted (golden types_arrays_multidim*) except where
docs/compat.md (Types) lists a deviation: the sub-array text of string-like elements, and NOT NULL
columns Debezium stops on (tests/connectors/postgres/test_multidim_arrays.py runs both end to end)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from headwater.connectors.postgres import types as t
from headwater.relational.table import Column, Table, TableId


def _pg(name: str, modifier: int = -1, **kw) -> t.PgType:
    return t.PgType(name, 0, modifier, **kw)


def _arr(element: t.PgType, *, streaming: bool = False, include_unknown: bool = False, **settings):
    pg = t.PgType("_" + element.name, 0, element=element)
    mapping = t.schema_and_converter(pg, include_unknown=include_unknown, settings=t.TypeSettings(**settings),
                                     streaming=streaming)
    assert mapping is not None
    return mapping


def _column_converter(element: t.PgType, *, optional: bool, include_unknown: bool = False):
    pg = t.PgType("_" + element.name, 0, element=element)
    col = Column(name="a", position=1, type_name=pg.name, type_oid=0, type_modifier=-1, optional=optional, native=pg)
    table = Table(TableId(None, "public", "x"), (col,), ())
    converters = t.PostgresValueConverters(include_unknown=include_unknown)
    return converters.converter_for(table, col, converters.schema_for(table, col))


def test_sub_arrays_keep_their_text():
    assert t._sub_arrays('{{a,"b c"},{NULL,"d\\"e"}}') == ['{a,"b c"}', '{NULL,"d\\"e"}']
    # braces, quotes and backslashes inside quoted elements do not nest
    assert t._sub_arrays('{{"}{","\\\\"},{"\\"{"}}') == ['{"}{","\\\\"}', '{"\\"{"}']
    assert t._sub_arrays("{{{1,2},{3,4}},{{5,6},{7,8}}}") == ["{{1,2},{3,4}}", "{{5,6},{7,8}}"]
    assert t._sub_arrays("{{POINT(1 1):POINT(2 2)}}") == ["{POINT(1 1):POINT(2 2)}"]


@pytest.mark.parametrize("text, want", [
    ("{{1,2},{3,4}}", [None, None]),
    ("{{1,NULL,3}}", [None]),
    ("{{{1}},{{2}},{{3}}}", [None, None, None]),     # 3-D: one entry per first-dimension sub-array
    ("[0:1][1:2]={{1,2},{3,4}}", [None, None]),
    ("{{NULL}}", [None]),
    ("[0:2]={7,NULL,9}", [7, None, 9]),             # explicit bounds of one dimension: dropped
    ("[-1:0]={7,8}", [7, 8]),
    ("{}", []),
])
def test_integer_arrays(text, want):
    for name in ("int2", "int4", "int8", "oid"):
        for streaming in (False, True):
            assert _arr(_pg(name), streaming=streaming)[1](text) == want


def test_other_null_entry_types_in_every_mode():
    cases = {
        "float4": "{{1.5,NaN},{-Infinity,NULL}}", "float8": "{{2.718281828459045,-0}}", "bool": "{{t,f},{NULL,t}}",
        "date": "{{2024-02-29,NULL},{infinity,1970-01-01}}", "time": "{{13:45:30.123456,NULL}}",
        "timetz": "{{13:45:30.5+05:30,NULL}}", "timestamp": '{{"2024-02-29 13:45:30.123456",NULL}}',
        "timestamptz": '{{"2024-02-29 11:45:30.123456+00",NULL}}', "bytea": '{{"\\\\xdeadbeef","\\\\x"}}',
        "hstore": '{{"\\"a\\"=>\\"1\\"","\\"b\\"=>NULL"}}', "citext": '{{MiXeD,"with space"}}',
        "geometry": "{{0101000000000000000000F03F0000000000000040:0101000000000000000000F03F0000000000000040}}",
    }
    modes = [{}, {"time_precision_mode": "connect", "binary_mode": "hex", "hstore_mode": "map"},
             {"time_precision_mode": "adaptive_time_microseconds", "binary_mode": "base64"}]
    for name, text in cases.items():
        for settings in modes:
            schema, conv = _arr(_pg(name), **settings)
            assert schema.items is not None and schema.items.optional
            assert conv(text) == [None] * len(t._sub_arrays(text)), (name, settings)


def test_numeric_arrays_in_every_decimal_mode():
    for mode in ("precise", "double", "string"):
        for element in (_pg("numeric", 4 + (6 << 16) + 2), _pg("numeric")):
            conv = _arr(element, decimal_mode=mode)[1]
            assert conv("{{1.5,NULL},{-2.25,0}}") == [None, None]
            assert conv("[0:0][0:1]={{1.5,NULL}}") == [None]
            # NaN/±Infinity anywhere nulls the whole value (as in one dimension)
            assert conv("{{1.5,NaN}}") is None
            assert conv("{{1},{-Infinity}}") is None
            assert conv("{{{Infinity}}}") is None
    assert _arr(_pg("numeric", 4 + (6 << 16) + 2))[1]("[0:1]={1.5,2.25}") == [Decimal("1.5"), Decimal("2.25")]
    assert _arr(_pg("numeric"), decimal_mode="string")[1]("[0:1]={1,2.50}") == ["1", "2.50"]


@pytest.mark.parametrize("name", ["text", "varchar", "bpchar", "char", "uuid", "json", "jsonb", "inet", "cidr",
                                  "macaddr", "macaddr8", "int4range", "int8range", "numrange", "tsrange",
                                  "tstzrange", "daterange", "tsvector", "ltree"])
def test_string_like_elements_give_the_sub_array_text(name):
    conv = _arr(_pg(name))[1]
    assert conv('{{x,"y z"},{NULL,"\\""}}') == ['{x,"y z"}', '{NULL,"\\""}']
    assert conv('[0:0][5:6]={{x,NULL}}') == ["{x,NULL}"]
    assert conv('[0:1]={x,"y z"}') == ["x", "y z"]


def test_enum_and_tsvector_elements_are_required():
    enum = _pg("color", kind="e", enum_labels=("red", "green"))
    for element in (enum, _pg("tsvector")):
        schema, conv = _arr(element)
        assert schema.items is not None and not schema.items.optional
        assert conv("{red,NULL}") is None                      # a NULL element nulls a 1-D value
        assert conv("{{red,NULL},{green,red}}") == ["{red,NULL}", "{green,red}"]   # never null per sub-array
        assert conv("[0:1]={red,green}") == ["red", "green"]


def test_unknown_element_types():
    domain = t.PgType("int4", 0, declared_name="posint")
    for mode, one, sub in [("bytes", b"7", b"{1,2}"), ("hex", "37", "7b312c327d"), ("base64", "Nw==", "ezEsMn0=")]:
        conv = _arr(domain, include_unknown=True, binary_mode=mode)[1]
        assert conv("[0:1]={7,7}") == [one, one]
        assert conv("{{1,2},{3,4}}") is None                      # Debezium: a required element is null
        assert conv.not_null("{{1,2}}") == [sub]                  # NOT NULL: the sub-array's text
    assert t.schema_and_converter(t.PgType("_posint", 0, element=domain)) is None


def test_not_null_columns_get_a_value_where_debezium_stops():
    numeric = _pg("numeric", 4 + (6 << 16) + 2)
    conv = _column_converter(numeric, optional=False)
    assert conv("{{1.5,NaN},{2,3}}") == [None, None]
    assert conv("{{1.5}}") == [None]
    with pytest.raises(ValueError, match="NOT NULL"):
        conv("{1.5,NaN}")           # one dimension: Debezium fails too (failure handling mode applies)
    assert _column_converter(numeric, optional=True)("{{1.5,NaN}}") is None

    domain = t.PgType("int4", 0, declared_name="posint")
    conv = _column_converter(domain, optional=False, include_unknown=True)
    assert conv("{{1,2},{3,4}}") == [b"{1,2}", b"{3,4}"]
    with pytest.raises(ValueError, match="NOT NULL"):
        conv("{1,NULL}")
    assert _column_converter(domain, optional=True, include_unknown=True)("{{1,2}}") is None

    enum = _pg("color", kind="e", enum_labels=("red", "green"))
    assert _column_converter(enum, optional=False)("{{red,NULL}}") == ["{red,NULL}"]
    assert _column_converter(_pg("int4"), optional=False)("{{1,2},{3,4}}") == [None, None]
