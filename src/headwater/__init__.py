"""Headwater: change data capture that emits Debezium's change events, for Python and Spark."""

__version__ = "0.1.0"
