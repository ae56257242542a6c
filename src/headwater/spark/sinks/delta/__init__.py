"""Delta Lake tables from the headwater Spark source: a current-state table and a change log per topic.

``DeltaSink(spark, path).write(batch_df, batch_id)`` (a ``foreachBatch`` destination) takes the
data-change records of a micro-batch (``op`` c/u/d/r/t; heartbeats, transaction metadata, logical
messages and tombstones are skipped) and, for every topic in it, keeps:

- ``<path>/<topic>`` — the **current state**: one row per key, the table's columns plus
  ``__headwater_position`` / ``__headwater_op`` / ``__headwater_ts_ms``. Updated by one ``MERGE``
  (or one rewrite) per batch; keyless tables go to the change log only. See :mod:`.current`.
- ``<path>/<topic>__changelog`` — the **change log**: every event appended, with its position,
  op, times, the source fields the connector's description names, ``snapshot``, key,
  ``before``/``after``/``source``/``transaction`` as structs. See :mod:`.changelog`.

One module per job: :mod:`.schemas` learns each topic's schemas from the batch's records (the
value's Connect schema, so ``value.converter.schemas.enable=true`` is required) and counts what
steers the writes; :mod:`.decoding` parses JSON events (``from_json`` and SQL expressions, see
:mod:`headwater.spark.sinks.connect_types`) and decodes typed rows (source options
``snapshotDelivery=rows`` and ``streamDelivery=rows``; :mod:`headwater.engine.typed_rows`) in the
executors; :mod:`.current` and :mod:`.changelog` write the two kinds of table; :mod:`.files`
writes Parquet files in the executors and commits them with delta-rs (a snapshot of typed rows
into a new table, a rewrite); :mod:`.small_batch` writes a table's small batch (``small.batch.rows``)
on the driver with delta-rs instead of Spark's writer and MERGE; :mod:`.options` checks the
options; :mod:`.sink` runs a batch.

Exactly-once per batch. Change-log appends carry Delta's idempotent-write id (``txnAppId`` =
``headwater-delta:<streaming query id>:changelog``, ``txnVersion`` = batch id), so a batch Spark
replays after a crash skips the change logs it already wrote. The appends of typed rows carry an
id of their own (``…:changelog:rows``), so a batch with typed rows and events of one topic stays
idempotent. The current state needs no id: the position guard makes a replayed batch's events
no-ops. Spark never replays a committed batch, so the one limit (a physically deleted row that an
old insert applied again would bring back) only matters if a checkpoint is reset while the tables
are kept — start such a run with a fresh table directory.

The topics of a batch are written concurrently (``parallelism``, default 4, from a small thread
pool): each table's commits are independent, and one at a time a batch spends most of its time
in per-commit overhead (planning, Delta log work) while the executors idle. Nothing here uses
session-wide settings, so the threads cannot disturb each other's commits.

Options (``options=`` or the pipeline's sink entry): ``unavailable.value.placeholder`` (as set
on the connector), ``decimal.format`` (``base64``/``numeric``, as ``value.converter.decimal.format``),
``changelog`` / ``current`` (``true``/``false``: write either kind of table), ``txn.app.id``
(replaces the streaming query id in the transaction ids), ``table.prefix`` (also register the
tables in the session catalog as ``<prefix><topic>``, non-alphanumerics as ``_``),
``parallelism`` (tables written at once), ``rewrite.fraction`` (0–1, or ``inf`` to always MERGE),
``files`` (``false``: snapshots into new tables and rewrites go through Spark's writer;
``snapshot.files`` is its older name).
"""

from headwater.spark.sinks.delta.changelog import CHANGELOG_SUFFIX
from headwater.spark.sinks.delta.current import KEY_PROPERTY, OP, POSITION, TS_MS
from headwater.spark.sinks.delta.sink import DeltaSink

__all__ = ["CHANGELOG_SUFFIX", "KEY_PROPERTY", "OP", "POSITION", "TS_MS", "DeltaSink"]
