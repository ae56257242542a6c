"""Building the SparkSession Headwater's pipeline runs in: Delta Lake and Spark's Kafka connector on
the classpath, Python workers running this interpreter, quiet logs.

Jars come from ``.jars/spark`` (fetched from Maven Central by ``scripts/fetch_jars.sh``) or the
directory in ``HEADWATER_SPARK_JARS``; without either, Spark resolves the same Maven coordinates
itself (``spark.jars.packages``, from Maven Central into ~/.ivy2).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")

# must match scripts/maven/spark-jars.pom.xml and the pyspark / delta-spark pins in pyproject.toml
MAVEN_PACKAGES = ("io.delta:delta-spark_2.13:4.4.0", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0")
JARS_ENV = "HEADWATER_SPARK_JARS"

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Python workers decode replication messages; they must see this interpreter's packages
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
    "spark.sql.session.timeZone": "UTC",
    # Delta rebuilds a table's state (for idempotent-write ids, MERGE, checkpoints) with this many
    # tasks; the default 50 made every CDC commit of a small table a 50-task job, seconds of
    # scheduling on a few cores (bench/README.md, "Measurements behind design choices")
    "spark.databricks.delta.snapshotPartitions": "4",
    # the Delta sink keeps a batch's newest event per key as row_number() = 1 over the key; Spark
    # then adds a partial WindowGroupLimit before the shuffle, which sorts every row once more to
    # drop duplicate keys that change batches have few of (1M rows of a rewrite sorted twice)
    "spark.sql.optimizer.windowGroupLimitThreshold": "-1",
    # Spark matches a regex against the message of the exception that ends a stopped query; when
    # stop() interrupts a batch inside Python, that message holds whole tracebacks and the default
    # 1 MB thread stack overflows in java.util.regex (the query thread then dies noisily).
    # Every query compiles new classes (Spark's generated code, method handles), and the JIT's
    # adapters for them go to the code cache's non-method segment, ~5.7 MB by default: a CI test
    # session filled it after ~18 minutes of pipelines ("Out of space in CodeCache for adapters",
    # the query failed); a pipeline running for days would too
    "spark.driver.extraJavaOptions": "-Xss16m -XX:NonNMethodCodeHeapSize=32m",
}


def jars_dir() -> Path | None:
    """The directory of extra jars, or None when Spark should resolve the Maven packages itself."""
    configured = os.environ.get(JARS_ENV)
    if configured:
        path = Path(configured)
        if not path.is_dir():
            raise FileNotFoundError(f"{JARS_ENV}={configured}: no such directory (expected the jars of "
                                    "scripts/maven/spark-jars.pom.xml)")
        return path
    repo_jars = Path(__file__).resolve().parents[3] / ".jars" / "spark"  # an editable checkout
    return repo_jars if any(repo_jars.glob("*.jar")) else None


def classpath_conf() -> dict[str, str]:
    directory = jars_dir()
    if directory is None:
        return {"spark.jars.packages": ",".join(MAVEN_PACKAGES)}
    return {"spark.jars": ",".join(str(p) for p in sorted(directory.glob("*.jar")))}


# what Spark's scripts and JVMs read from a Spark home (launch scripts, jars, configuration)
_SPARK_HOME_PARTS = ("bin", "sbin", "jars", "conf", "data", "licenses")


def compiled_spark_home() -> Path | None:
    """A Spark home for a pip-installed PySpark whose Python processes import the installed, compiled
    ``pyspark`` package instead of ``python/lib/pyspark.zip``.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every Python process it
    starts (the stream runner of each query, the planner and worker daemons). Python compiles modules
    imported from a zip anew each time, where site-packages has cached bytecode (bench/README.md,
    "Python processes without `pyspark.zip`"). This home links to the same ``bin``, ``jars`` and the rest, but
    has no ``python`` directory, so those processes find ``pyspark`` (and py4j) where pip put them.
    It lives under ``$XDG_CACHE_HOME/headwater`` (default ``~/.cache``); None when that cannot be
    written or PySpark is not laid out as pip installs it (Spark's own home is then used as is)."""
    import pyspark

    installed = Path(pyspark.__file__).resolve().parent
    if not (installed / "python" / "lib" / "pyspark.zip").is_file() or not (installed / "jars").is_dir():
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "headwater"
    tag = hashlib.sha256(str(installed).encode()).hexdigest()[:12]
    home = cache / f"spark-home-{pyspark.__version__}-{tag}"
    if (home / "jars").is_dir():
        return home
    try:
        staging = cache / f".{home.name}.{os.getpid()}"
        staging.mkdir(parents=True, exist_ok=True)
        for name in _SPARK_HOME_PARTS:
            if (installed / name).exists() and not (staging / name).is_symlink():
                (staging / name).symlink_to(installed / name)
        os.replace(staging, home)  # atomic: concurrent first runs all see a complete home
    except OSError:  # another process made it first, or the cache cannot be written
        shutil.rmtree(staging, ignore_errors=True)
        if not (home / "jars").is_dir():
            return None
    return home


class SparkStartError(RuntimeError):
    """Spark's JVM exited before the session existed."""


def _start_failure(settings: Mapping[str, str]) -> str:
    """What to tell when the JVM exited while starting: usually the jars it had to resolve."""
    packages = settings.get("spark.jars.packages")
    java = os.environ.get("JAVA_HOME") or shutil.which("java") or "no java on PATH and no JAVA_HOME"
    if packages:
        return (f"Spark's JVM exited while starting (java: {java}). With no jar directory ({JARS_ENV} unset, no "
                f".jars/spark in a checkout) it resolves {packages} through Ivy first; the resolution messages "
                "above say what failed. Fetch the jars once with scripts/fetch_jars.sh (or point "
                f"{JARS_ENV} at a directory of them), or fix the Ivy settings: a ~/.m2/repository holding a pom "
                "without its jar makes Ivy's local-m2-cache resolver fail instead of trying Maven Central")
    return f"Spark's JVM exited while starting (java: {java}); its messages above say why"


def under_spark_submit() -> bool:
    """True when spark-submit started this Python (it then owns the master and the deploy mode)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(app_name: str = "headwater", master: str | None = None,
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession for Headwater: ``master`` (default ``local[*]``; under spark-submit, spark-submit's
    master wins), ``conf`` over the defaults. Registers the ``headwater`` data source."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if not under_spark_submit() and "SPARK_HOME" not in os.environ:
        home = compiled_spark_home()
        if home is not None:
            os.environ["SPARK_HOME"] = str(home)
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if not under_spark_submit():
        builder = builder.master(master or "local[*]")
    settings = {**DEFAULT_CONF, **classpath_conf(), **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if exc.getCondition() != "JAVA_GATEWAY_EXITED":
            raise
        raise SparkStartError(_start_failure(settings)) from exc
    spark.sparkContext.setLogLevel("ERROR")
    from headwater.spark.source import register

    register(spark)
    return spark


def thread_target(session: SparkSession, target: Callable[..., T]) -> Callable[..., T]:
    """``target`` for a thread that runs Spark jobs on behalf of this one: each call starts from a
    copy of this thread's local properties (the streaming query's job group and ids) and its tags,
    so stopping the query cancels the thread's jobs too.

    ``pyspark.util.inheritable_thread_target`` hands every thread that runs one wrapped target the
    same ``Properties`` object. Spark and Delta write into the local properties while a job runs
    (``spark.sql.execution.id``, Delta's job descriptions), so threads sharing it submitted jobs
    under each other's execution ids, often ones that had already ended. Spark 4.2's scheduler holds
    such a job, with its stages, RDDs and broadcasts, until the driver stops
    (``DAGScheduler.activeQueryToJobs``): the demo's driver heap grew by every batch until a
    broadcast found no memory, after 17 minutes.
    """
    context = session.sparkContext
    properties = context._jsc.sc().getLocalProperties().clone()
    tags = set(session.getTags())

    @functools.wraps(target)
    def run(*args: Any, **kwargs: Any) -> T:
        context._jsc.sc().setLocalProperties(properties.clone())  # this call's own copy
        for tag in tags:
            session.addTag(tag)
        return target(*args, **kwargs)

    return run
