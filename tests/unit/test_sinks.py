from __future__ import annotations

from headwater.sinks.files import repair_torn_tail


def test_torn_tail_is_cut_back_to_the_last_complete_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":')
    assert repair_torn_tail(path) == len(b'{"a":')
    assert path.read_bytes() == b'{"a":1}\n{"a":2}\n'
    assert repair_torn_tail(path) == 0
    path.write_bytes(b"no newline at all")
    assert repair_torn_tail(path) == len(b"no newline at all") and path.read_bytes() == b""
    assert repair_torn_tail(tmp_path / "missing.jsonl") == 0
