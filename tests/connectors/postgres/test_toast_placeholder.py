"""`unavailable.value.placeholder` reaches the events of unchanged out-of-line (TOAST) values."""

from __future__ import annotations

from helpers.capture import RunningCapture, base_properties, drop_sentinels, emit_sentinel_and_wait, wait_slot_active


def test_custom_placeholder_for_unchanged_toast(pg_db, tmp_path):
    pg_db.execute("CREATE TABLE docs (id int PRIMARY KEY, n int, body text)")
    pg_db.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")  # out of line, uncompressed
    props = base_properties(pg_db, tmp_path, "hw_toast_ph", **{"snapshot.mode": "no_data",
                                                              "unavailable.value.placeholder": "__gone__"})
    capture = RunningCapture(props, tmp_path / "out.jsonl").start()
    try:
        wait_slot_active(pg_db, "hw_toast_ph", capture)
        pg_db.execute("INSERT INTO docs VALUES (1, 0, repeat('x', 10000))")
        pg_db.execute("UPDATE docs SET n = 1 WHERE id = 1")   # body unchanged: not sent by pgoutput
        emit_sentinel_and_wait(pg_db, capture, quiet=0.3)
    finally:
        capture.stop()
    afters = [r["value"]["payload"]["after"] for r in drop_sentinels(capture.records())
              if r["topic"].endswith(".docs")]
    assert afters[0]["body"] == "x" * 10000
    assert afters[1] == {"id": 1, "n": 1, "body": "__gone__"}
