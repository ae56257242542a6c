"""The filter scenarios through the Spark source (records built in the executors by the same
builder as the standalone runner): logical-decoding message prefixes, skip.messages.without.change
with column filters, message.key.columns regexes, and transaction metadata for transactions whose
changes are all filtered out. Compared strictly with what Debezium recorded."""

from __future__ import annotations

import pytest

from helpers.capture import drop_sentinels, spark_properties
from helpers.conformance import EXTRA_GOLDEN, EXTRA_SCENARIOS, assert_events_equal
from helpers.spark_capture import SparkCapture, run_scenario_through_spark, wait_first_batch

FILTER_SCENARIOS = ["message_prefix_include", "message_prefix_exclude", "skip_unchanged_exclude",
                    "skip_unchanged_include", "key_columns_regex", "tx_filtered_out"]


@pytest.mark.parametrize("name", FILTER_SCENARIOS)
def test_filter_scenario_through_spark_matches_debezium(name, spark, pg_db, tmp_path):
    got, want = run_scenario_through_spark(spark, EXTRA_SCENARIOS / name, EXTRA_GOLDEN, pg_db, tmp_path)
    assert_events_equal(got, want, name)


def test_begin_of_interleaved_transactions_keeps_position_order(spark, pg_db, tmp_path):
    """BEGIN is emitted at the transaction's BEGIN message, whose LSN is that of its first change
    (here to a table outside table.include.list), which may lie before the commit of a
    transaction sent earlier: its record must still sort after that transaction's records (its
    position is message 0 of its own transaction), and it has its first change's LSN in its id."""
    pg_db.execute("CREATE TABLE public.keep (id int PRIMARY KEY); CREATE TABLE public.other (id int PRIMARY KEY)")
    props = spark_properties(pg_db, tmp_path, "hws_interleaved", **{
        "provide.transaction.metadata": "true", "table.include.list": r"public\.keep"})
    capture = SparkCapture(spark, props, tmp_path / "checkpoint").start()
    try:
        wait_first_batch(capture.query)
        a, b = pg_db.connect(autocommit=False), pg_db.connect()
        with a.cursor() as cur_a, b.cursor() as cur_b:
            cur_a.execute("INSERT INTO public.other VALUES (1) RETURNING txid_current()")
            xid_a = cur_a.fetchone()[0]
            cur_b.execute("INSERT INTO public.keep VALUES (2)")  # commits first, after A's first change
            cur_a.execute("INSERT INTO public.keep VALUES (1)")
            a.commit()
        capture.emit_sentinel_and_wait(pg_db)
    finally:
        capture.stop()
    rows = capture.rows()
    positions = [r.position for r in rows]
    assert positions == sorted(positions), "records are not in position order"
    records = [r for r in drop_sentinels(capture.records()) if r["value"] is not None]
    values = [r["value"]["payload"] for r in records]
    assert [v.get("status") or v["after"]["id"] for v in values] == ["BEGIN", 2, "END", "BEGIN", 1, "END"]
    begin_a, end_b = values[3], values[2]
    assert begin_a["id"].split(":")[0] == str(xid_a)
    assert int(begin_a["id"].split(":")[1]) < int(end_b["id"].split(":")[1])  # A's first change, before B's commit
    assert values[5]["event_count"] == 1
