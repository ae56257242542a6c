"""Headwater on Apache Spark: the ``headwater`` Python data source, sinks and the pipeline runner."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make ``spark.readStream.format("headwater")`` / ``spark.read.format("headwater")`` available."""
    from headwater.spark.source import register as _register

    _register(spark)


__all__ = ["register"]
