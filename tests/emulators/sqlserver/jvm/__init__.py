"""Microsoft's JDBC driver and Debezium's own SQL Server connector, run against the emulator.

``classpath`` finds the jars (Maven's 3.6.1 in .jars/debezium-sqlserver, or the oracle venv's
3.6.3); ``launch`` runs ``JdbcProbe.java`` and ``DebeziumRunner.java`` (single-file source launch).
"""

from .classpath import (
    DEBEZIUM_JARS,
    JDBC_JARS,
    Classpath,
    ClasspathError,
    find_classpath,
)
from .launch import (
    DebeziumProcess,
    JvmError,
    RunnerResult,
    compile_sources,
    run_debezium,
    run_jdbc_probe,
    source_launcher_problem,
)

__all__ = [
    "DEBEZIUM_JARS",
    "JDBC_JARS",
    "Classpath",
    "ClasspathError",
    "DebeziumProcess",
    "JvmError",
    "RunnerResult",
    "compile_sources",
    "find_classpath",
    "run_debezium",
    "run_jdbc_probe",
    "source_launcher_problem",
]
