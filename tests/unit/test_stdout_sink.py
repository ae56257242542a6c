"""The stdout sink: one record per line, or indented with `pretty`."""

from __future__ import annotations

import io
import json

from headwater.engine.records import EncodedBatch
from headwater.sinks.files import StdoutSink

LINES = (b'{"topic":"t","key":{"id":1},"value":{"a":[1,2]},"headers":[]}\n'
         b'{"topic":"t","key":null,"value":null,"headers":[]}\n')


def _encoded(lines: bytes) -> EncodedBatch:
    return EncodedBatch([("t", 2, lines)], None)


def test_lines_are_written_as_they_are():
    out = io.BytesIO()
    StdoutSink(None, out).write_encoded(_encoded(LINES))  # type: ignore[arg-type]
    assert out.getvalue() == LINES


def test_pretty_indents_each_record_keeping_its_values_and_key_order():
    out = io.BytesIO()
    StdoutSink(None, out, pretty=True).write_encoded(_encoded(LINES))  # type: ignore[arg-type]
    text = out.getvalue().decode()
    assert text.startswith('{\n  "topic": "t",\n  "key": {\n    "id": 1\n  },')
    records = [json.loads(part) for part in text.replace("}\n{", "}\x00{").split("\x00")]
    assert records == [json.loads(line) for line in LINES.splitlines()]
    assert list(records[0]) == ["topic", "key", "value", "headers"]
