"""What a failed streaming query's text says: its cause in one line, and whether a restart helps.

The texts are shaped as Spark 4.2 reports them (abridged from real failures: a terminated
walsender seen by the source's Python worker, a Kafka producer's delivery timeout in a sink)."""

from __future__ import annotations

import pickle

from headwater.engine.connector import ConnectorError, RetriableConnectorError, connector_error
from headwater.spark.failures import RetriableSinkError, SinkError, failure_reason, retriable_cause
from headwater.spark.sinks.kafka import delivery_error

SOURCE_FAILURE = """\
[STREAM_FAILED] Query [id = 3441cec3, runId = 60f5e34a] terminated with exception: \
[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform latestOffset: \
Traceback (most recent call last):
  File "/work/main/src/headwater/spark/source.py", line 404, in latestOffset
    return _spark_offset(self._open().latest(start, max_rows))
  File "/work/main/src/headwater/connectors/postgres/streaming.py", line 181, in _run
    raise connection_error(f"replication stream from slot {{self.slot_name!r}} failed", exc) from None
headwater.engine.connector.{cls}: replication stream from slot 's1' failed: terminating connection due to \
administrator command
 SQLSTATE: 38000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: headwater-pipeline [id = 3441cec3, runId = 60f5e34a]
"""

KAFKA_SAVE_FAILURE = """\
An error occurred while calling o1495.save.
: org.apache.spark.SparkException: [WRITING_JOB_ABORTED] Writing job aborted. SQLSTATE: 40000
	at org.apache.spark.sql.errors.QueryExecutionErrors$.writingJobAbortedError(QueryExecutionErrors.scala:754)
Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 12.0 failed 1 times
	at org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)
Caused by: {cls}: {message}
	at org.apache.kafka.clients.producer.internals.ProducerBatch.completeExceptionally(ProducerBatch.java:300)
"""


def test_a_lost_connection_in_the_source_is_retriable_and_named():
    text = SOURCE_FAILURE.format(cls="RetriableConnectorError")
    cause = "replication stream from slot 's1' failed: terminating connection due to administrator command"
    assert retriable_cause(text) == cause
    assert failure_reason(Exception(text)) == cause


def test_any_other_connector_error_is_named_but_not_retried():
    text = SOURCE_FAILURE.format(cls="ConnectorError")
    assert retriable_cause(text) is None
    assert failure_reason(Exception(text)).startswith("replication stream from slot 's1' failed")


def test_a_retriable_connector_error_keeps_its_class_across_processes():
    error = connector_error("lost", retriable=True)
    assert type(error) is RetriableConnectorError and error.retriable
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is RetriableConnectorError and back.retriable and str(back) == "lost"
    assert type(connector_error("bad password", retriable=False)) is ConnectorError


def test_a_kafka_delivery_timeout_is_a_retriable_sink_error_naming_the_batch():
    text = KAFKA_SAVE_FAILURE.format(cls="org.apache.kafka.common.errors.TimeoutException",
                                     message="Expiring 4 record(s) for p.public.codes-0:120002 ms has passed "
                                             "since batch creation")
    error = delivery_error("127.0.0.1:9092", 7, Exception(text))
    assert isinstance(error, RetriableSinkError)
    assert str(error) == ("kafka sink (127.0.0.1:9092): batch 7 was not delivered: TimeoutException: Expiring 4 "
                          "record(s) for p.public.codes-0:120002 ms has passed since batch creation")
    # as the query's failure reports it: the sink's exception, raised in foreachBatch
    query_text = f"Traceback (most recent call last):\n  ...\nheadwater.spark.failures.RetriableSinkError: {error}\n"
    assert retriable_cause(query_text) == str(error)
    assert failure_reason(Exception(query_text)) == str(error)


def test_a_kafka_error_a_retry_cannot_fix_fails_the_pipeline():
    text = KAFKA_SAVE_FAILURE.format(cls="org.apache.kafka.common.errors.RecordTooLargeException",
                                     message="The message is 2000000 bytes when serialized which is larger than "
                                             "1048576, the value of the max.request.size configuration.")
    error = delivery_error("127.0.0.1:9092", 3, Exception(text))
    assert type(error) is SinkError
    assert "batch 3 was not delivered: RecordTooLargeException: The message is 2000000 bytes" in str(error)
    assert retriable_cause(f"headwater.spark.failures.SinkError: {error}") is None


def test_without_a_known_cause_the_first_line_is_the_reason():
    assert failure_reason(Exception("\n  something broke\nmore")) == "something broke"
    assert failure_reason(RuntimeError()) == "RuntimeError"
    assert failure_reason(Exception("x\nCaused by: java.io.IOException")) == "java.io.IOException"
