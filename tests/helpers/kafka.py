"""A throwaway Apache Kafka broker for the tests: one KRaft node (broker + controller in one JVM).

The broker runs from the jars of the Kafka distribution that ``scripts/setup.sh`` fetches from
Maven Central into ``<repo>/.jars/kafka`` (or the directory in ``HEADWATER_KAFKA_JARS``), with
``java`` from PATH. It listens on 127.0.0.1 only, on free ports, keeps its log segments and its
own log file (``broker.log``) in a temporary directory, and is stopped (SIGTERM, then SIGKILL)
and deleted by :meth:`ThrowawayKafka.stop` — or by an ``atexit`` handler when a test run ends
without stopping it. Topics are created on first use (``auto.create.topics.enable``) with
``partitions`` partitions each. With ``HEADWATER_KAFKA_LOG_DIR=<dir>`` set, :meth:`stop` first copies
the broker's log there (``broker-<port>.log``), for looking into a failed run.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_ENV = "HEADWATER_KAFKA_JARS"
LOG_DIR_ENV = "HEADWATER_KAFKA_LOG_DIR"
_STARTED_LINE = "Kafka Server started"


class KafkaBrokerError(RuntimeError):
    """The throwaway broker could not be set up, started or stopped."""


def kafka_jars_dir() -> Path:
    """The directory holding the broker's jars; a clear error when they have not been fetched."""
    configured = os.environ.get(JARS_ENV)
    directory = Path(configured) if configured else REPO_ROOT / ".jars" / "kafka"
    if not any(directory.glob("kafka_2.13-*.jar")):
        source = f"{JARS_ENV}={configured}" if configured else str(directory)
        raise KafkaBrokerError(f"no Apache Kafka broker jars (kafka_2.13-*.jar) in {source}: run scripts/setup.sh, "
                               f"which fetches them from Maven Central into .jars/kafka")
    return directory


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


_live: set[ThrowawayKafka] = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        brokers = [b for b in _live if b._owner_pid == os.getpid()]  # not the parent's after a fork
    for broker in brokers:
        with contextlib.suppress(Exception):
            broker.stop()


class ThrowawayKafka:
    """A private single-node Kafka cluster: format + start on :meth:`start`, kill + delete on :meth:`stop`."""

    host = "127.0.0.1"

    def __init__(self, *, partitions: int = 1, heap: str = "512m", start_timeout: float = 120.0) -> None:
        self.jars = kafka_jars_dir()
        self.java = shutil.which("java")
        if self.java is None:
            raise KafkaBrokerError("`java` is not on PATH: the Kafka broker needs a JDK 17+ (scripts/setup.sh)")
        self.partitions = partitions
        self.heap = heap
        self.start_timeout = start_timeout
        self.port = 0
        self.controller_port = 0
        self.root_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        self._lock = threading.RLock()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        if self.root_dir is None:
            raise KafkaBrokerError("the broker has not been started")
        return self.root_dir / "broker.log"

    def __repr__(self) -> str:
        state = "running" if self._process is not None else "stopped"
        return f"<ThrowawayKafka {self.bootstrap_servers} {state} {self.root_dir}>"

    def __enter__(self) -> ThrowawayKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def hung(self) -> Iterator[None]:
        """The broker hangs inside this block (SIGSTOP): its port accepts connections, but no
        request is answered — as a broker stuck in a long GC pause or on a dead disk."""
        if self._process is None:
            raise KafkaBrokerError("the broker has not been started")
        os.kill(self._process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self._process.pid, signal.SIGCONT)

    def broker_log(self, tail: int = 40) -> str:
        """The last lines of the broker's log and of its console output (for error messages)."""
        out = []
        for path in (self.log_file, self.log_file.with_name("console.log")):
            with contextlib.suppress(OSError):
                lines = path.read_text(errors="replace").splitlines()[-tail:]
                out.append(f"--- {path.name} ---\n" + "\n".join(lines))
        return "\n".join(out)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> ThrowawayKafka:
        with self._lock:
            if self._process is not None:
                return self
            self.root_dir = Path(tempfile.mkdtemp(prefix="headwater-kafka-"))
            try:
                self._start()
            except BaseException:
                self.stop()
                raise
            return self

    def _java(self, *args: str) -> list[str]:
        return [str(self.java), f"-Dlog4j2.configurationFile={self.root_dir / 'log4j2.properties'}",
                "-cp", f"{self.jars}/*", *args]

    def _start(self) -> None:
        assert self.root_dir is not None
        self.port, self.controller_port = _free_port(), _free_port()
        while self.controller_port == self.port:
            self.controller_port = _free_port()
        properties = self.root_dir / "server.properties"
        properties.write_text(self._server_properties())
        (self.root_dir / "log4j2.properties").write_text(self._log4j2_properties())
        # a KRaft cluster id is 16 random bytes in URL-safe base64 without padding (22 characters)
        cluster_id = "-"
        while cluster_id.startswith("-"):  # one in 64 would read as an option to kafka-storage's parser
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(properties)),
                             capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=self.start_timeout)
        if fmt.returncode != 0:
            raise KafkaBrokerError(f"formatting the Kafka log directory failed (exit {fmt.returncode}):\n"
                                   f"{fmt.stdout[-2000:]}{fmt.stderr[-2000:]}")
        with open(self.root_dir / "console.log", "wb") as console:
            self._process = subprocess.Popen(
                self._java(f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                           "kafka.Kafka", str(properties)),
                stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                start_new_session=True)  # not in the test runner's process group: Ctrl-C is ours to handle
        with _live_lock:
            _live.add(self)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Ready = the listener accepts connections and the server logged that it finished starting
        (the port opens a moment before the broker has registered with its controller)."""
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise KafkaBrokerError(f"the Kafka broker exited during start-up (exit {self._process.returncode})\n"
                                       f"{self.broker_log()}")
            if _port_open(self.port):
                with contextlib.suppress(OSError):
                    if _STARTED_LINE in self.log_file.read_text(errors="replace"):
                        return
            time.sleep(0.2)
        raise KafkaBrokerError(f"the Kafka broker did not start within {self.start_timeout:.0f} s\n{self.broker_log()}")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after ``grace`` seconds; then delete the directory."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None:
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGTERM)
                    try:
                        process.wait(grace)
                    except subprocess.TimeoutExpired:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(process.pid, signal.SIGKILL)
                        process.wait(10)
            with _live_lock:
                _live.discard(self)
            if self.root_dir is not None:
                if os.environ.get(LOG_DIR_ENV):
                    with contextlib.suppress(OSError):
                        Path(os.environ[LOG_DIR_ENV]).mkdir(parents=True, exist_ok=True)
                        shutil.copy(self.log_file, Path(os.environ[LOG_DIR_ENV]) / f"broker-{self.port}.log")
                shutil.rmtree(self.root_dir, ignore_errors=True)
                self.root_dir = None

    # -- configuration --------------------------------------------------------------------------
    def _server_properties(self) -> str:
        assert self.root_dir is not None
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.root_dir / "data"),
            "num.partitions": str(self.partitions),
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a test broker: small segments, no background work worth mentioning
            "log.segment.bytes": str(16 * 1024 * 1024),
            "num.network.threads": "2",
            "num.io.threads": "2",
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def _log4j2_properties(self) -> str:
        assert self.root_dir is not None
        return "\n".join([
            "status = warn",
            "appender.file.type = File",
            "appender.file.name = file",
            f"appender.file.fileName = {self.root_dir / 'broker.log'}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = file",
            # the request logger and the state-change logger are chatty at INFO
            "logger.request.name = kafka.request.logger",
            "logger.request.level = WARN",
            "logger.state.name = state.change.logger",
            "logger.state.level = WARN",
            "",
        ])


def running_broker(partitions: int) -> Iterator[ThrowawayKafka]:
    """A started broker for a fixture to yield from; stopped when the fixture ends."""
    broker = ThrowawayKafka(partitions=partitions).start()
    try:
        yield broker
    finally:
        broker.stop()
