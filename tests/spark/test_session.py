"""The SparkSession Headwater builds: Spark's Python processes import the installed, compiled pyspark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from headwater.spark.session import compiled_spark_home


def test_compiled_spark_home_links_spark_but_not_its_zipped_python(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    home = compiled_spark_home()
    assert home is not None and home.parent == tmp_path / "cache" / "headwater"
    installed = Path(pyspark.__file__).resolve().parent
    assert (home / "jars").resolve() == installed / "jars"
    assert (home / "bin" / "spark-submit").is_file()
    assert not (home / "python").exists()  # no python/lib/pyspark.zip on the workers' path
    assert compiled_spark_home() == home  # made once, then reused
    assert [p.name for p in home.parent.iterdir()] == [home.name]  # no staging directory left


def test_compiled_spark_home_is_none_where_the_cache_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert compiled_spark_home() is None


def test_python_workers_import_the_installed_pyspark(spark):
    """Set by build_session (the tests' session is one): the JVM got SPARK_HOME = the compiled
    home, so a task's Python worker imports pyspark from site-packages, not from pyspark.zip."""
    assert os.environ["SPARK_HOME"] == str(compiled_spark_home())

    def where(_: object) -> str:
        import pyspark as worker_pyspark
        return worker_pyspark.__file__

    files = spark.sparkContext.parallelize([0, 1], 2).map(where).collect()
    assert files == [pyspark.__file__] * 2, files


IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="empty"/>
  <resolvers>
    <filesystem name="empty">
      <ivy pattern="${ivy.settings.dir}/repo/[organisation]/[module]/[revision]/ivy.xml"/>
      <artifact pattern="${ivy.settings.dir}/repo/[organisation]/[module]/[revision]/[artifact].[ext]"/>
    </filesystem>
  </resolvers>
</ivysettings>
"""


def test_a_jvm_that_cannot_resolve_its_packages_is_told_as_such(tmp_path):
    """Spark's own error is "Java gateway process exited before sending its port number"; the
    session says the packages could not be resolved and what to do. An Ivy that knows only an empty
    directory stands for a resolution that fails (offline, or a partial ~/.m2)."""
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(IVY_SETTINGS)
    conf = {"spark.jars.packages": "org.example:missing:1.0", "spark.jars.ivySettings": str(settings),
            "spark.jars.ivy": str(tmp_path / "ivy")}
    code = ("from headwater.spark.session import build_session\n"
            f"build_session('unresolvable', master='local[1]', conf={conf!r})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode != 0
    assert "SparkStartError: Spark's JVM exited while starting" in done.stderr, done.stderr[-3000:]
    assert "it resolves org.example:missing:1.0 through Ivy first" in done.stderr
    assert "scripts/fetch_jars.sh" in done.stderr


def test_threads_of_one_batch_each_get_their_own_local_properties(spark):
    """Spark and Delta set local properties while a job runs (``spark.sql.execution.id``): what one
    of the threads sets must stay out of the others, while each starts from the caller's values."""
    import threading

    from headwater.spark.session import thread_target

    context = spark.sparkContext
    context.setLocalProperty("headwater.test.caller", "batch 7")
    set_by_first = threading.Event()
    seen: dict[str, object] = {}

    def first() -> None:
        seen["first starts with"] = context.getLocalProperty("headwater.test.caller")
        context.setLocalProperty("spark.sql.execution.id", "41")
        set_by_first.set()

    def second() -> None:
        assert set_by_first.wait(30)
        seen["second starts with"] = context.getLocalProperty("headwater.test.caller")
        seen["second sees"] = context.getLocalProperty("spark.sql.execution.id")

    def run(role: str) -> None:
        first() if role == "first" else second()

    target = thread_target(spark, run)  # wrapped once, run by both threads (as the Delta sink does)
    try:
        threads = [threading.Thread(target=target, args=(role,)) for role in ("first", "second")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        context.setLocalProperty("headwater.test.caller", None)
    assert seen == {"first starts with": "batch 7", "second starts with": "batch 7", "second sees": None}


def test_the_newest_row_per_key_is_sorted_once(spark):
    """build_session turns off Spark's partial WindowGroupLimit: for the Delta sink's
    row_number() = 1 per key it sorted every row before the shuffle as well as after it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = spark.range(1000).select((F.col("id") % 100).alias("k"), F.col("id").cast("string").alias("pos"))
    newest = rows.withColumn("rank", F.row_number().over(Window.partitionBy("k").orderBy(F.col("pos").desc())))
    plan = newest.filter("rank = 1")._jdf.queryExecution().executedPlan().toString()
    assert "WindowGroupLimit" not in plan and plan.count("Sort [") == 1, plan
    assert sorted(r["pos"] for r in newest.filter("rank = 1").collect()) == sorted(str(900 + k) for k in range(100))


def test_the_code_cache_has_room_for_the_adapters_of_a_long_run(spark):
    """A CI session ran out of the code cache's non-method segment (~5.7 MB by default) after
    ~18 minutes of pipelines: "Out of space in CodeCache for adapters" failed a query."""
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    assert int(bean.getVMOption("NonNMethodCodeHeapSize").getValue()) >= 32 << 20


def test_the_test_sessions_jvm_compiles_with_c2_and_a_segmented_code_cache(spark):
    """The tests run every other JVM on C1 alone (helpers/jvm.py), but not the session each test
    worker keeps for the whole run, also under pytest-xdist, whose workers inherit the controller's
    C1 setting: C1 alone has a 48 MB code cache without the non-method segment build_session sizes."""
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" not in arguments, arguments
    assert "-XX:NonNMethodCodeHeapSize=32m" in arguments
