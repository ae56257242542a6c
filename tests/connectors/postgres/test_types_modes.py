"""Type conversions under Debezium's alternative modes and the special values (expected values are
the ones Debezium 3.6.3 emitted in tests/conformance/extra/golden/types_*)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from headwater.connectors.postgres import types as t
from headwater.model.schema import struct
from headwater.serialization.json import JsonConverter


def _pg(name: str, modifier: int = -1, element: t.PgType | None = None, **kw) -> t.PgType:
    return t.PgType(name, 0, modifier, element=element, **kw)


def _conv(pg: t.PgType, streaming: bool = False, **settings):
    mapping = t.schema_and_converter(pg, settings=t.TypeSettings(**settings), streaming=streaming)
    assert mapping is not None
    return mapping


@pytest.mark.parametrize("text, snapshot, streaming", [
    ("2024-02-29", 19782, 19782),
    ("infinity", -622191234, -2147472692),
    ("-infinity", -625821272, -2147472691),
    ("0044-03-15 BC", -703383, -735160),      # the snapshot (JDBC) drops the era
    ("0001-01-01", -719162, -719162),
])
def test_dates_per_path(text, snapshot, streaming):
    assert _conv(_pg("date"))[1](text) == snapshot
    assert _conv(_pg("date"), streaming=True)[1](text) == streaming
    # array elements go through pgJDBC on both paths
    assert _conv(_pg("_date", element=_pg("date")), streaming=True)[1]("{" + text.join('""') + "}") == [snapshot]


def test_timestamps_bc_infinity_and_arrays():
    micro = _conv(_pg("timestamp"))[1]
    assert micro("0044-03-15 12:00:00.5 BC") == -63517780799500000
    assert micro("infinity") == 9223372036825200000
    assert _conv(_pg("timestamp", 3))[1]("-infinity") == -9223372036832400
    arr = _conv(_pg("_timestamp", element=_pg("timestamp")))[1]
    # Julian calendar before 1582-10-15 (java.sql.Timestamp)
    assert arr('{"0044-03-15 12:00:00.5 BC","1900-01-01 00:00:00.000001",infinity}') == [
        -63517953599500000, -2208988799999999, 9223372036825200000]
    tz = _conv(_pg("timestamptz"))[1]
    assert tz("0044-03-15 12:00:00.5+00 BC") == "-0043-03-15T12:00:00.500000Z"
    assert tz("infinity") == "infinity"
    assert _conv(_pg("timestamptz", 3))[1]("0001-12-31 23:59:59.999+00 BC") == "0000-12-31T23:59:59.999Z"
    tz_arr = _conv(_pg("_timestamptz", element=_pg("timestamptz")))[1]
    assert tz_arr('{"0044-03-15 12:00:00.5+00 BC",-infinity}') == [
        "0044-03-15T12:00:00.500000Z", "+292269055-12-02T23:00:00.000000Z"]


def test_time_precision_modes():
    for mode, t3, t6 in [("adaptive", 49530123, 49530123456), ("adaptive_time_microseconds", 49530123000,
                                                                  49530123456), ("connect", 49530123, 49530123)]:
        _, conv3 = _conv(_pg("time", 3), time_precision_mode=mode)
        _, conv6 = _conv(_pg("time"), time_precision_mode=mode)
        assert (conv3("13:45:30.123"), conv6("13:45:30.123456")) == (t3, t6), mode
    assert _conv(_pg("time"), time_precision_mode="connect")[0].name == "org.apache.kafka.connect.data.Time"
    assert _conv(_pg("timestamp"), time_precision_mode="connect")[1]("2024-02-29 13:45:30.123456") == 1709214330123
    assert _conv(_pg("date"), time_precision_mode="connect")[0].name == "org.apache.kafka.connect.data.Date"
    # java.sql.Time in arrays: milliseconds, midnight for 24:00:00; timetz without fraction
    assert _conv(_pg("_time", element=_pg("time")))[1]("{13:45:30.123456,24:00:00}") == [49530123000, 0]
    assert _conv(_pg("_timetz", element=_pg("timetz")))[1]("{13:45:30.5+05:30}") == ["08:15:30Z"]
    assert _conv(_pg("timetz"))[1]("24:00:00-05") == "05:00:00Z"


@pytest.mark.parametrize("text, micros, iso", [
    ("1 year 2 mons 3 days 04:05:06.789", 37091106789000, "P1Y2M3DT4H5M6.789S"),
    ("-3 days -04:00:00", -273600000000, "P0Y0M-3DT-4H0M0S"),
    ("1 year 2 mons -3 days +04:05:06.000789", 36572706000789, "P1Y2M-3DT4H5M6.000789S"),
    ("-00:00:01.5", -1500000, "P0Y0M0DT0H0M-1.5S"),
    ("-00:00:00.000001", -1, "P0Y0M0DT0H0M-0.000001S"),
    ("178000000 years", 9223372036854775807, "P178000000Y0M0DT0H0M0S"),   # saturated like Java's (long)
    ("-178000000 years", -9223372036854775808, "P-178000000Y0M0DT0H0M0S"),
])
def test_interval_modes(text, micros, iso):
    assert _conv(_pg("interval"))[1](text) == micros
    schema, conv = _conv(_pg("interval"), interval_mode="string")
    assert (schema.name, conv(text)) == ("io.debezium.time.Interval", iso)


def test_decimal_modes_and_special_values():
    n102 = 4 + (10 << 16) + 2   # numeric(10,2)
    schema, conv = _conv(_pg("numeric", n102))
    assert (schema.name, conv("12.50"), conv("NaN")) == ("org.apache.kafka.connect.data.Decimal", Decimal("12.50"),
                                                         None)
    assert _conv(_pg("numeric"))[1]("2.50") == {"scale": 1, "value": b"\x19"}   # stripTrailingZeros
    assert _conv(_pg("numeric"))[1]("0.00") == {"scale": 0, "value": b"\x00"}
    schema, conv = _conv(_pg("numeric", n102), decimal_mode="double")
    assert (schema.type, conv("-0.01"), str(conv("Infinity"))) == ("float64", -0.01, "inf")
    schema, conv = _conv(_pg("numeric"), decimal_mode="string")
    assert [conv(x) for x in ("100.000", "NaN", "Infinity", "-Infinity")] == [
        "100.000", "NAN", "POSITIVE_INFINITY", "NEGATIVE_INFINITY"]
    for mode in ("precise", "double", "string"):   # any NaN/Infinity element nulls the array
        arr = _conv(_pg("_numeric", element=_pg("numeric")), decimal_mode=mode)[1]
        assert arr("{1,NaN}") is None
        assert arr("{1,NULL}")[1] is None
    assert _conv(_pg("money"), money_fraction_digits=3)[1]("-$1,234.5") == Decimal("-1234.500")
    assert _conv(_pg("money"), decimal_mode="string")[1]("-$92,233,720,368,547,758.08") == "-92233720368547758.08"
    assert _conv(_pg("money"), decimal_mode="double")[1]("$0.99") == 0.99


def test_binary_modes_and_unknown_types():
    for mode, want in [("bytes", b"\xfb\xff"), ("base64", "+/8="), ("base64-url-safe", "-_8="), ("hex", "fbff")]:
        schema, conv = _conv(_pg("bytea"), binary_mode=mode)
        assert (schema.type, conv("\\xfbff")) == ("bytes" if mode == "bytes" else "string", want)
    assert t.schema_and_converter(_pg("box")) is None
    schema, conv = t.schema_and_converter(_pg("box"), include_unknown=True)
    assert (schema.type, conv("(1,1),(0,-1.5)")) == ("bytes", b"(1.0,1.0),(0.0,-1.5)")
    _, conv = t.schema_and_converter(_pg("pg_lsn"), include_unknown=True, settings=t.TypeSettings(binary_mode="hex"))
    assert conv("0/0") == "302f30"
    assert t._java_double_text(1e20) == "1.0E20" and t._java_double_text(1.5e-5) == "1.5E-5"
    # arrays of a domain: bytes elements, a NULL element nulls the array
    domain_arr = _pg("_d_pos", element=t.PgType("int4", 0, declared_name="d_pos"))
    assert t.schema_and_converter(domain_arr) is None
    _, conv = t.schema_and_converter(domain_arr, include_unknown=True)
    assert (conv("{7,8}"), conv("{1,NULL}")) == ([b"7", b"8"], None)
    assert t.schema_and_converter(_pg("_money", element=_pg("money")), include_unknown=True) is None


def test_hstore_map_and_enum_arrays():
    schema, conv = _conv(_pg("hstore"), hstore_mode="map")
    assert schema.type == "map"
    assert list(conv('"b"=>"2", "a"=>NULL')) == ["a", "b"]       # HashMap order
    enum_arr = _pg("_mood", element=t.PgType("mood", 0, kind="e", enum_labels=("sad", "ok")))
    _, conv = t.schema_and_converter(enum_arr)
    assert (conv("{sad,ok}"), conv("{sad,NULL}")) == (["sad", "ok"], None)


def test_postgis_ewkb():
    value = t._postgis("0101000020E6100000A4703D0AD7C351C0AE47E17A142E4540")
    assert value["srid"] == 4326 and value["wkb"][:5] == bytes.fromhex("0101000020")
    assert t._postgis("0101000000000000000000F03F0000000000000040")["srid"] is None
    _, conv = t.schema_and_converter(_pg("_geometry", element=_pg("geometry")))
    assert len(conv("{0101000000000000000000F03F0000000000000040:0101000000000000000000F03F0000000000000040}")) == 2


def test_required_column_with_a_null_conversion_fails():
    from headwater.relational.table import Column, Table, TableId

    col = Column(name="n", position=1, type_name="numeric", type_oid=0, type_modifier=-1, optional=False,
                 native=_pg("numeric", 4 + (10 << 16) + 2))
    table = Table(TableId(None, "public", "x"), (col,), ())
    conv = t.PostgresValueConverters().converter_for(table, col, t.schema_and_converter(col.native)[0])
    assert conv("1.5") == Decimal("1.5")
    with pytest.raises(ValueError, match="NOT NULL"):
        conv("NaN")


def test_json_decimal_format_numeric():
    from headwater.model.schema import replace

    dec = t._decimal_schema(2, 10)
    schema = struct("v", [("d", replace(dec, optional=True, default=Decimal("1.5"))), ("e", dec)])
    out = JsonConverter(True, decimal_format="numeric").to_bytes(schema, {"d": None, "e": Decimal("1E-10")})
    assert b'"default":1.50' in out
    assert json.loads(out)["payload"] == {"d": 1.5, "e": 0.0}
    assert out.endswith(b'"payload":{"d":1.50,"e":0.00}}')
    base64_out = JsonConverter(True).to_bytes(schema, {"d": None, "e": Decimal("2")})
    assert json.loads(base64_out)["payload"] == {"d": "AJY=", "e": "AMg="}
