"""What the driver's scheduler still tracks, read through py4j (Spark internals, tests only)."""

from __future__ import annotations

from typing import Any


def jobs_of_finished_executions(spark: Any) -> dict[int, list[int]]:
    """SQL execution id → job ids, for the executions whose jobs Spark's DAGScheduler still holds
    (``activeQueryToJobs``, Spark 4.2) although the execution has ended. Spark forgets an
    execution's jobs when the execution ends; a job submitted under an execution id that has
    already ended (a local property shared between threads) is held, with its stages, RDDs and
    broadcasts, for as long as the driver runs."""
    jvm = spark.sparkContext._jvm
    tracked = spark.sparkContext._jsc.sc().dagScheduler().activeQueryToJobs()
    running = jvm.org.apache.spark.sql.execution.SQLExecution
    out: dict[int, list[int]] = {}
    entries = tracked.entrySet().iterator()
    while entries.hasNext():
        entry = entries.next()
        execution = entry.getKey()
        if running.getQueryExecution(execution) is None:
            jobs = entry.getValue().iterator()
            ids = []
            while jobs.hasNext():
                ids.append(jobs.next().jobId())
            out[execution] = sorted(ids)
    return out
