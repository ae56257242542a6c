"""`headwater` command line: run, validate, demo, pipeline, signal, docs."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence

from headwater import __version__

log = logging.getLogger("headwater")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)  # Spark's gateway chatter


def _install_signal_handlers(stop: threading.Event) -> None:
    def handler(signum: int, _frame: object) -> None:
        if stop.is_set():
            return
        log.info("received %s; draining, writing and acknowledging before exit", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _error(message: str) -> None:
    sys.stderr.write(f"headwater: error: {message}\n")


def _load(args: argparse.Namespace):  # -> HeadwaterConfig | None (imported lazily for a fast --help)
    """The configuration named on the command line (loading logs each warning once); None after an error."""
    from headwater import config as cfg

    try:
        config = cfg.load(args.config, overrides=args.set or ())
    except cfg.ConfigError as exc:
        _error(exc.one_line())
        return None
    return config


def cmd_run(args: argparse.Namespace) -> int:
    from headwater import config as cfg
    from headwater.engine.connector import ConnectorError
    from headwater.engine.offsets import OffsetStoreError
    from headwater.standalone import build_engine

    config = _load(args)
    if config is None:
        return EXIT_CONFIG
    stop = threading.Event()
    _install_signal_handlers(stop)
    try:
        engine = build_engine(config)
        engine.run(stop)
    except cfg.ConfigError as exc:
        _error(exc.one_line())
        return EXIT_CONFIG
    except (ConnectorError, OffsetStoreError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    except Exception as exc:  # a bug or an unforeseen condition: say so plainly, keep the trace for a report
        log.debug("unexpected failure", exc_info=True)
        _error(f"unexpected {type(exc).__name__}: {exc} (run with -v for the traceback; offsets were stored "
               "only for what was written, so a restart loses nothing)")
        return EXIT_FAILURE
    log.info("stopped after %d records", engine.stats.records)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from headwater.engine.connector import ConnectorError
    from headwater.standalone import build_connector

    config = _load(args)
    if config is None:
        return EXIT_CONFIG

    try:
        build_connector(config)  # checks the options the connector itself refuses, without connecting
    except ConnectorError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    print(f"{args.config}: valid {config.connector_key} configuration (sink: {config.sink_type or 'stdout'})")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from headwater.cli.demo import SparkPipelineBackend, StandaloneBackend, run_demo

    backend = StandaloneBackend() if args.standalone else SparkPipelineBackend()
    return run_demo(backend, duration=args.duration, rate=args.rate, workdir=args.workdir)


def cmd_pipeline(args: argparse.Namespace) -> int:
    from headwater.config import ConfigError
    from headwater.spark.pipeline import run_pipeline

    try:
        return run_pipeline(args.pipeline)
    except ConfigError as exc:
        print(f"headwater pipeline: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def cmd_signal(args: argparse.Namespace) -> int:
    """Send a signal through a channel the configuration enables (the first of source, file, kafka
    it lists, unless --channel says which)."""
    import orjson

    from headwater.engine.connector import ConnectorError
    from headwater.engine.signals.channels import SignalChannelError, enabled_channels, new_signal, send_signal
    from headwater.engine.signals.signal import SignalError

    if args.config is None:
        args.config = args.config_option
    elif args.config_option is not None and args.config_option != args.config:
        _error(f"two configurations given: {args.config} and --config {args.config_option}")
        return EXIT_CONFIG
    if args.config is None:
        _error("no configuration: headwater signal --config FILE --type TYPE [--data JSON]")
        return EXIT_CONFIG
    if args.data is not None:
        try:
            parsed = orjson.loads(args.data)
        except orjson.JSONDecodeError as exc:
            _error(f"--data is not valid JSON ({exc})")
            return EXIT_CONFIG
        if not isinstance(parsed, dict):
            _error("--data must be a JSON object, e.g. '{\"data-collections\": [\"public.orders\"]}'")
            return EXIT_CONFIG
    config = _load(args)
    if config is None:
        return EXIT_CONFIG
    channel = args.channel
    if channel is None:
        sendable = [c for c in enabled_channels(config.connector) if c in ("source", "file", "kafka")]
        if not sendable:
            _error("no channel in signal.enabled.channels that `headwater signal` can write to (source, file, kafka)")
            return EXIT_CONFIG
        channel = sendable[0]
    elif channel not in enabled_channels(config.connector):
        _error(f"the {channel} signal channel is not enabled (signal.enabled.channels="
               f"{','.join(enabled_channels(config.connector)) or 'none'}): the connector would not read the signal")
        return EXIT_CONFIG
    if channel == "source" and not config.connector.get("signal.data.collection"):
        _error("the source channel writes to the signal table: set signal.data.collection")
        return EXIT_CONFIG
    try:
        signal = new_signal(args.type, args.data, args.id, channel)
    except SignalError as exc:
        _error(str(exc))
        return EXIT_CONFIG
    try:
        if channel == "source":
            done = _send_to_signal_table(config, signal)
        else:
            done = send_signal(config.connector, channel, signal)
    except (SignalChannelError, ConnectorError) as exc:
        _error(str(exc))
        return EXIT_FAILURE
    data = f" with data {signal.data}" if signal.data is not None else ""
    print(f"signal {signal.id!r} of type {signal.type!r}{data}: {done}")
    return EXIT_OK


def _send_to_signal_table(config, signal) -> str:  # (HeadwaterConfig, Signal) -> what was done
    from headwater.engine.connector import ConnectorError
    from headwater.engine.signals.channels import send_signal
    from headwater.standalone import build_connector

    connector = build_connector(config)
    capture = connector.capture_source(parallel=False)
    try:
        source = capture.incremental_source()
        if source is None:
            raise ConnectorError(f"connector {connector.connector_name!r} has no signal table support")
        try:
            return send_signal(config.connector, "source", signal, source=source)
        finally:
            source.close()
    finally:
        capture.close()


def cmd_docs(_args: argparse.Namespace) -> int:
    from headwater.config.docs import render_markdown

    sys.stdout.write(render_markdown())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="headwater", description="Change data capture with Debezium's events.")
    parser.add_argument("--version", action="version", version=f"headwater {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="capture changes until stopped (SIGTERM/SIGINT stop cleanly)")
    run.add_argument("config", help=".properties, Kafka Connect JSON, YAML or Debezium Server application.properties")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a property (repeatable)")
    run.set_defaults(func=cmd_run)

    validate = sub.add_parser("validate", help="check a configuration without connecting")
    validate.add_argument("config")
    validate.add_argument("--set", action="append", metavar="KEY=VALUE")
    validate.set_defaults(func=cmd_validate)

    demo = sub.add_parser("demo", help="throwaway PostgreSQL with sample data, captured live by the Spark pipeline")
    demo.add_argument("--duration", type=float, default=None,
                      help="generate changes for this many seconds after the initial snapshot, then stop "
                           "(default: until Ctrl-C)")
    demo.add_argument("--rate", type=float, default=20.0, help="generated transactions per second")
    demo.add_argument("--workdir", default=None, help="where outputs go (default .headwater/demo)")
    demo.add_argument("--standalone", action="store_true",
                      help="the standalone runner (no Spark) into JSONL files, instead of the Spark pipeline")
    demo.set_defaults(func=cmd_demo)

    pipeline = sub.add_parser("pipeline", help="run a Spark pipeline: source -> Delta / Kafka / JSONL sinks")
    pipeline.add_argument("pipeline", help="the pipeline YAML (source, sinks, trigger, checkpoint, spark)")
    pipeline.set_defaults(func=cmd_pipeline)

    signal_cmd = sub.add_parser("signal", help="send a signal (execute-snapshot, stop-snapshot, ...) through a "
                                "channel the configuration enables")
    signal_cmd.add_argument("config", nargs="?", help="the connector's configuration (as for run)")
    signal_cmd.add_argument("--config", dest="config_option", metavar="FILE", help="the same, as an option")
    signal_cmd.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a property (repeatable)")
    signal_cmd.add_argument("--channel", type=str.lower, choices=("source", "file", "kafka"),
                            help="where to send it (default: the first of these in signal.enabled.channels)")
    signal_cmd.add_argument("--type", required=True, help="the signal's type, e.g. execute-snapshot")
    signal_cmd.add_argument("--data", help="its data, a JSON object, e.g. "
                            "'{\"data-collections\": [\"public.orders\"], \"type\": \"incremental\"}'")
    signal_cmd.add_argument("--id", help="its id (default: a new UUID)")
    signal_cmd.set_defaults(func=cmd_signal)

    docs = sub.add_parser("docs", help="print the configuration reference (Markdown)")
    docs.set_defaults(func=cmd_docs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.verbose)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
