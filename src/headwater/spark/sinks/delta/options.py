"""The Delta sink's options (``options=`` or the keys of a pipeline's sink entry), checked."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from headwater.config import ConfigError

OPTIONS = ("unavailable.value.placeholder", "decimal.format", "value.converter.decimal.format", "changelog",
           "current", "txn.app.id", "table.prefix", "parallelism", "rewrite.fraction", "files",
           "snapshot.files", "small.batch.rows")
DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
DEFAULT_PARALLELISM = 4
# a batch whose events may touch at least this share of a current-state table's rows rewrites the
# table in one pass instead of MERGE's two (find the touched files, then rewrite them): the one pass
# is faster for a large share, and a MERGE of a few thousand changes already costs a good part of a
# large one's time; see bench/README.md (Measurements behind design choices)
DEFAULT_REWRITE_FRACTION = 0.1
# a topic's batch of at most this many events is written by the driver with delta-rs (see
# small_batch.py); Spark's writer costs a dozen jobs per table whatever the rows (bench/README.md)
DEFAULT_SMALL_BATCH_ROWS = 10_000


@dataclass(frozen=True)
class SinkOptions:
    placeholder: bytes  # unavailable.value.placeholder, as the values carry it
    decimal_format: str  # base64 or numeric
    changelog: bool
    current: bool
    files: bool  # snapshots into new tables and rewrites written by the executors (see files.py)
    app_id: str | None  # txn.app.id
    table_prefix: str | None
    parallelism: int
    rewrite_fraction: float
    small_batch_rows: int = DEFAULT_SMALL_BATCH_ROWS  # 0: every batch through Spark

    @classmethod
    def parse(cls, options: Mapping[str, str], table_prefix: str | None = None) -> SinkOptions:
        opts = {str(k): str(v) for k, v in options.items()}
        unknown = sorted(set(opts) - set(OPTIONS))
        if unknown:
            raise ConfigError([f"delta sink: unknown option(s) {', '.join(unknown)} (known: {', '.join(OPTIONS)})"])
        placeholder = opts.pop("unavailable.value.placeholder", DEFAULT_PLACEHOLDER)
        fmt = opts.pop("decimal.format", None) or opts.pop("value.converter.decimal.format", "base64")
        decimal_format = fmt.strip().lower()
        if decimal_format not in ("base64", "numeric"):
            raise ConfigError([f"delta sink option decimal.format={fmt!r}: expected base64 or numeric"])
        changelog = _flag(opts, "changelog", True)
        current = _flag(opts, "current", True)
        # snapshot.files: this option's name when it covered snapshots only
        files = _flag(opts, "files", _flag(opts, "snapshot.files", True))
        app_id = opts.pop("txn.app.id", None)
        prefix = table_prefix if table_prefix is not None else opts.pop("table.prefix", None)
        raw = opts.pop("parallelism", str(DEFAULT_PARALLELISM))
        if not raw.strip().isdigit() or int(raw) < 1:
            raise ConfigError([f"delta sink option parallelism={raw!r}: expected a whole number >= 1"])
        parallelism = int(raw)
        raw = opts.pop("rewrite.fraction", str(DEFAULT_REWRITE_FRACTION))
        try:
            rewrite_fraction = float(raw)
        except ValueError:
            rewrite_fraction = -1.0
        if not 0 <= rewrite_fraction <= 1 and rewrite_fraction != float("inf"):
            raise ConfigError([f"delta sink option rewrite.fraction={raw!r}: expected a number from 0 to 1 "
                               "(or inf: always MERGE)"])
        raw = opts.pop("small.batch.rows", str(DEFAULT_SMALL_BATCH_ROWS))
        if not raw.strip().isdigit():
            raise ConfigError([f"delta sink option small.batch.rows={raw!r}: expected a whole number >= 0 "
                               "(0: every batch through Spark)"])
        small_batch_rows = int(raw)
        return cls(bytes.fromhex(placeholder[4:]) if placeholder.startswith("hex:") else placeholder.encode(),
                   decimal_format, changelog, current, files, app_id, prefix, parallelism, rewrite_fraction,
                   small_batch_rows)


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.pop(name, None)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError([f"delta sink option {name}={raw!r}: expected true or false"])


def absolute(path: str) -> str:
    """Local paths made absolute (executors may run elsewhere); URIs (s3a://, abfss://…) kept."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path) or path.startswith("file:"):
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))
