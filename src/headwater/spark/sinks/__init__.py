"""Destinations for the records of the headwater Spark source (used from foreachBatch)."""
