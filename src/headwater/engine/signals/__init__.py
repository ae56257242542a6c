"""Signals and snapshots on demand: signal channels, Debezium's signal actions, incremental
snapshots (watermark windows de-duplicated against the stream), blocking snapshots and
notifications — once, for every connector. A connector supplies the database's part through
:mod:`headwater.engine.signals.connector`."""
