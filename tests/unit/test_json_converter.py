from __future__ import annotations

import base64
import json
from decimal import Decimal

from headwater.engine.records import SourceRecord
from headwater.engine.transaction import java_hashmap_order, java_string_hash
from headwater.model.schema import Schema, struct
from headwater.serialization.json import JsonConverter, RecordSerializer

DECIMAL = Schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                 parameters={"scale": "2", "connect.decimal.precision": "10"}, optional=True)


def test_schema_rendering_matches_kafka_json_converter():
    s = struct("x.Value", [("id", Schema("int32")), ("r", Schema("float32", optional=True)),
                           ("score", Schema("int32", optional=True, default=0))], optional=True)
    assert s.to_json() == {"type": "struct", "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "float", "optional": True, "field": "r"},
        {"type": "int32", "optional": True, "default": 0, "field": "score"}],
        "optional": True, "name": "x.Value"}


def test_payload_encoding_and_null_default_replacement():
    s = struct("x.Value", [("b", Schema("bytes", optional=True)), ("d", DECIMAL),
                           ("f", Schema("float64", optional=True)),
                           ("score", Schema("int32", optional=True, default=7))])
    out = json.loads(JsonConverter(True).to_bytes(s, {"b": b"\xde\xad", "d": Decimal("12345678.91"),
                                                      "f": float("nan"), "score": None}))
    assert out["payload"] == {"b": "3q0=", "d": "SZYC0w==", "f": "NaN", "score": 7}
    bare = json.loads(JsonConverter(False, replace_null_with_default=False).to_bytes(s, {"b": None, "d": None,
                                                                                        "f": 1.5, "score": None}))
    assert bare == {"b": None, "d": None, "f": 1.5, "score": None}


def test_negative_decimal_is_twos_complement():
    out = json.loads(JsonConverter(False).to_bytes(struct("v", [("d", DECIMAL)]), {"d": Decimal("-1.00")}))
    assert base64.b64decode(out["d"]) == (-100).to_bytes(1, "big", signed=True)


def test_context_headers_follow_record_headers():
    conv = JsonConverter(True)
    ser = RecordSerializer(conv, conv, conv, [("__debezium.context.taskId", "0")])
    key_schema = struct("k.Key", [("id", Schema("int32"))])
    rec = SourceRecord("t", key_schema, {"id": 1}, None, None, {}, (("__debezium.newkey", key_schema, {"id": 2}),))
    line = json.loads(ser.line(rec))
    assert [h["key"] for h in line["headers"]] == ["__debezium.newkey", "__debezium.context.taskId"]
    assert line["value"] is None and line["key"]["payload"] == {"id": 1}
    bare = SourceRecord("m", None, None, None, None, {}, (), context_headers=False)
    assert json.loads(ser.line(bare))["headers"] == []


def test_java_hashmap_order_matches_debezium_golden():
    # END data_collections order recorded from Debezium in the tx_metadata scenario
    keys = ["public.orders", "public.order_lines", "public.stock"]
    assert java_hashmap_order(keys) == ["public.orders", "public.stock", "public.order_lines"]
    assert java_string_hash("a") == 97
    assert java_string_hash("polygenelubricants") == (-2147483648) & 0xFFFFFFFF
