"""``headwater demo``: a throwaway PostgreSQL with the sample ``inventory`` database, captured live.

One harness (:func:`run_demo`: the cluster, the sample data, the change generator once the
initial snapshot is in, the live view, the catch-up before stopping, the summary) with two
back-ends: :class:`SparkPipelineBackend` (the default: local Spark into Delta Lake and JSONL) and
:class:`StandaloneBackend` (``--standalone``: the standalone runner into JSONL files, no Spark).
"""

from headwater.cli.demo.backend import DemoBackend
from headwater.cli.demo.harness import run_demo
from headwater.cli.demo.spark_pipeline import SparkPipelineBackend
from headwater.cli.demo.standalone import StandaloneBackend

__all__ = ["DemoBackend", "SparkPipelineBackend", "StandaloneBackend", "run_demo"]
