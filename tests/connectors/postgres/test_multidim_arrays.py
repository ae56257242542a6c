"""Multi-dimensional arrays where Headwater knowingly differs from Debezium 3.6.3 (docs/compat.md,
Types), so the expected events are written here rather than recorded as a golden file:

- element types Debezium converts with toString() (text, varchar, char, "char", uuid, json, jsonb,
  inet, cidr, macaddr, macaddr8, the ranges, tsvector, ltree, enums) give one string per
  sub-array of the first dimension. Debezium's is the Java array's identity
  (`[Ljava.lang.String;@1b2c3d4e`, different on every run); Headwater's is the sub-array's
  PostgreSQL text (`{a,"b c"}`), the same on both paths.
- in a NOT NULL column, values Debezium nulls and then stops on (a numeric[] holding NaN, an array
  of a domain with include.unknown.datatypes) get one entry per sub-array instead: null for the
  numbers, the sub-array's text as bytes for the domain. With the default
  event.processing.failure.handling.mode=fail the connector goes on.

The deterministic cases (null entries, explicit bounds) are the golden scenarios
types_arrays_multidim*, recorded from Debezium."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from helpers.capture import (
    RunningCapture,
    base_properties,
    emit_sentinel_and_wait,
    wait_slot_active,
    wait_snapshot_done,
)

SETUP = r"""
CREATE EXTENSION IF NOT EXISTS ltree;
CREATE TYPE color AS ENUM ('red', 'green', 'dark blue');
CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
CREATE TABLE mdt (
    id integer PRIMARY KEY, a_text text[], a_vc varchar(5)[], a_char char(3)[], a_qchar "char"[], a_uuid uuid[],
    a_json json[], a_jsonb jsonb[], a_inet inet[], a_cidr cidr[], a_mac macaddr[], a_mac8 macaddr8[],
    a_i4r int4range[], a_dater daterange[], a_tsv tsvector[], a_ltree ltree[], a_enum color[]);
ALTER TABLE mdt REPLICA IDENTITY FULL;
INSERT INTO mdt VALUES
  (1, '{{a,"b c"},{NULL,"d\"e"}}', '{{abc,"d e"}}', '{{ab,"c d"}}', '{{a,b},{c,d}}',
      '{{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}}', '{{"{\"a\": 1}","[1, 2]"},{"null",NULL}}',
      '{{"{\"b\": 2, \"a\": 1}"}}', '{{192.168.0.1,::1/128}}', '{{10.0.0.0/8}}', '{{08:00:2b:01:02:03}}',
      '{{08:00:2b:01:02:03:04:05}}', '{{"[1,5)",empty}}', '{{"[2024-01-01,2024-02-01)"}}', '{{"a b"}}',
      '{{Top.Science,a.b_c}}', '{{red,"dark blue"},{NULL,green}}'),
  (2, '[0:1][1:1]={{"{x}"},{","}}', '{{{a}},{{b}}}', NULL, '{{NULL}}', '{}', NULL, NULL, NULL, NULL, NULL, NULL, NULL,
      NULL, NULL, NULL, '[0:0][0:1]={{red,NULL}}');
CREATE TABLE nn (id integer PRIMARY KEY, e color[] NOT NULL, n numeric(6,2)[] NOT NULL, d posint[] NOT NULL);
INSERT INTO nn VALUES (1, '{{red,NULL},{green,"dark blue"}}', '{{1.5,NaN},{2,3}}', '{{1,2},{3,4}}');
"""

# row 1, 2 of mdt: the after image of the snapshot read and of the streamed insert (id + 100)
MDT = {
    1: {"a_text": ['{a,"b c"}', '{NULL,"d\\"e"}'], "a_vc": ['{abc,"d e"}'], "a_char": ['{"ab ","c d"}'],
        "a_qchar": ["{a,b}", "{c,d}"], "a_uuid": ["{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}"],
        "a_json": ['{"{\\"a\\": 1}","[1, 2]"}', '{"null",NULL}'], "a_jsonb": ['{"{\\"a\\": 1, \\"b\\": 2}"}'],
        "a_inet": ["{192.168.0.1,::1}"], "a_cidr": ["{10.0.0.0/8}"], "a_mac": ["{08:00:2b:01:02:03}"],
        "a_mac8": ["{08:00:2b:01:02:03:04:05}"], "a_i4r": ['{"[1,5)",empty}'],
        "a_dater": ['{"[2024-01-01,2024-02-01)"}'], "a_tsv": ['{"\'a\' \'b\'"}'], "a_ltree": ["{Top.Science,a.b_c}"],
        "a_enum": ['{red,"dark blue"}', "{NULL,green}"]},
    2: {"a_text": ['{"{x}"}', '{","}'], "a_vc": ["{{a}}", "{{b}}"], "a_char": None, "a_qchar": ["{NULL}"],
        "a_uuid": [], "a_json": None, "a_jsonb": None, "a_inet": None, "a_cidr": None, "a_mac": None,
        "a_mac8": None, "a_i4r": None, "a_dater": None, "a_tsv": None, "a_ltree": None, "a_enum": ["{red,NULL}"]},
}
NN = {"e": ["{red,NULL}", '{green,"dark blue"}'], "n": [None, None],
      "d": [base64.b64encode(b"{1,2}").decode(), base64.b64encode(b"{3,4}").decode()]}


def _payloads(records: list[dict[str, Any]], topic: str) -> list[dict[str, Any]]:
    return [r["value"]["payload"] for r in records if r["topic"] == topic and r["value"] is not None]


def _values(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "id"}


@pytest.mark.parametrize("workers", ["0", "2"])  # events built on the reader thread, in worker processes
def test_multidimensional_values_that_deviate_from_debezium(pg_db, tmp_path: Path, workers: str) -> None:
    pg_db.execute(SETUP)
    props = base_properties(pg_db, tmp_path, "hw_multidim", **{"include.unknown.datatypes": "true",
                                                                  "encoding.workers": workers})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, "hw_multidim", capture)
        wait_snapshot_done(pg_db, capture)
        pg_db.execute("INSERT INTO mdt SELECT id + 100, a_text, a_vc, a_char, a_qchar, a_uuid, a_json, a_jsonb, "
                      "a_inet, a_cidr, a_mac, a_mac8, a_i4r, a_dater, a_tsv, a_ltree, a_enum FROM mdt")
        pg_db.execute("INSERT INTO nn SELECT id + 100, e, n, d FROM nn")
        pg_db.execute("UPDATE mdt SET a_text = '{{z}}' WHERE id = 101")
        pg_db.execute("INSERT INTO nn VALUES (2, '{red}', '{1}', '{1}')")  # after the values above
        emit_sentinel_and_wait(pg_db, capture)
    finally:
        capture.stop()
    records = capture.records()

    mdt = _payloads(records, "dbserver1.public.mdt")
    assert [(p["op"], p["after"]["id"]) for p in mdt] == [("r", 1), ("r", 2), ("c", 101), ("c", 102), ("u", 101)]
    for payload in mdt[:4]:
        assert _values(payload["after"]) == MDT[payload["after"]["id"] % 100], payload["op"]
    update = mdt[4]
    assert _values(update["before"]) == MDT[1]
    assert _values(update["after"]) == {**MDT[1], "a_text": ["{z}"]}
    schema = {f["field"]: f for f in records[0]["value"]["schema"]["fields"][1]["fields"]}
    assert schema["a_text"]["items"] == {"type": "string", "optional": True}
    assert schema["a_enum"]["items"]["optional"] is False  # a string per sub-array, never null

    nn = _payloads(records, "dbserver1.public.nn")
    assert [(p["op"], p["after"]["id"]) for p in nn] == [("r", 1), ("c", 101), ("c", 2)]
    for payload in nn[:2]:
        assert _values(payload["after"]) == NN
    assert _values(nn[2]["after"]) == {"e": ["red"], "n": ["ZA=="], "d": ["MQ=="]}  # 1.00
