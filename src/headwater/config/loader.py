"""Reading configuration files: Java ``.properties``, Kafka Connect JSON, YAML, Debezium Server layout.

Every format ends up as flat ``dict[str, str]`` properties with Debezium's names. Files whose keys
start with ``debezium.`` use Debezium Server's ``application.properties`` layout:

- ``debezium.source.X``                 -> connector property ``X``
- ``debezium.sink.type``                -> :attr:`LoadedConfig.sink_type`
- ``debezium.sink.<type>.Y``            -> :attr:`LoadedConfig.sink` ``[Y]`` (for the chosen type)
- ``debezium.format.key|value|header``  -> :attr:`LoadedConfig.format`
- ``debezium.format.key.X``             -> connector property ``key.converter.X`` (same for value, header)
- anything else under ``debezium.``     -> :attr:`LoadedConfig.extra`, with a warning
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from headwater.config.errors import ConfigError
from headwater.config.fields import is_sensitive_key, join_list

FORMATS = ("properties", "json", "yaml")
_EXTENSIONS = {".properties": "properties", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
SERVER_PREFIX = "debezium."
_FORMAT_PARTS = ("key", "value", "header")


@dataclass
class LoadedConfig:
    """Raw (unvalidated) properties read from a file, split by destination."""

    connector: dict[str, str] = field(default_factory=dict)
    sink_type: str | None = None
    sink: dict[str, str] = field(default_factory=dict)
    format: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    source_path: Path | None = None
    server_layout: bool = False
    """True when the file used Debezium Server's ``debezium.*`` layout."""
    all_sinks: dict[str, dict[str, str]] = field(default_factory=dict)
    """``debezium.sink.<type>.*`` options of every type seen (``sink`` is the chosen type's)."""

    def __repr__(self) -> str:
        def mask(d: Mapping[str, str]) -> dict[str, str]:
            return {k: ("********" if is_sensitive_key(k) else v) for k, v in d.items()}

        return (
            f"LoadedConfig(connector={mask(self.connector)!r}, sink_type={self.sink_type!r}, "
            f"sink={mask(self.sink)!r}, format={self.format!r}, name={self.name!r}, "
            f"extra={mask(self.extra)!r}, source_path={self.source_path!r})"
        )

    # ---------------------------------------------------------------------------------------

    def route(self, key: str, value: str, *, where: str = "") -> None:
        """Put one ``debezium.*`` property where Debezium Server would."""
        at = f"{where}: " if where else ""
        rest = key[len(SERVER_PREFIX) :]
        if rest.startswith("source.") and len(rest) > len("source."):
            self.connector[rest[len("source.") :]] = value
            return
        if rest == "sink.type":
            self.sink_type = value.strip() or None
            self._refresh_sink()
            return
        if rest.startswith("sink."):
            parts = rest[len("sink.") :].split(".", 1)
            if len(parts) == 2 and parts[0] and parts[1]:
                self.all_sinks.setdefault(parts[0], {})[parts[1]] = value
                self._refresh_sink()
                return
        if rest.startswith("format."):
            sub = rest[len("format.") :]
            if sub in _FORMAT_PARTS:
                self.format[sub] = value.strip()
                return
            part, _, option = sub.partition(".")
            if part in _FORMAT_PARTS and option:
                self.connector[f"{part}.converter.{option}"] = value
                return
        self.extra[key] = value
        if rest.split(".", 1)[0] in ("transforms", "predicates"):
            why = "single message transforms and predicates are not supported; transform downstream"
        else:
            why = "not a Debezium Server setting Headwater supports"
        self.warnings.append(f"{at}ignored '{key}': {why}")

    def _refresh_sink(self) -> None:
        self.sink = dict(self.all_sinks.get(self.sink_type, {})) if self.sink_type else {}

    def unused_sink_warnings(self) -> list[str]:
        """Warnings for ``debezium.sink.<type>.*`` options of types other than the chosen one."""
        return [
            f"ignored 'debezium.sink.{t}.*' options: the sink type is "
            f"{repr(self.sink_type) if self.sink_type else 'not set (debezium.sink.type)'}"
            for t in self.all_sinks
            if t != self.sink_type
        ]

    def apply_overrides(self, overrides: Iterable[str]) -> LoadedConfig:
        """Apply ``KEY=VALUE`` strings (later ones win); ``debezium.*`` keys are routed as in a file."""
        problems = []
        parsed: list[tuple[str, str]] = []
        for i, item in enumerate(overrides, 1):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or not key or any(c.isspace() for c in key):
                problems.append(f"invalid override #{i} {_describe_override(item)}: expected KEY=VALUE")
                continue
            parsed.append((key, value))
        if problems:
            raise ConfigError(problems)
        for key, value in parsed:
            if key.startswith(SERVER_PREFIX):
                self.route(key, value, where="override")
            else:
                self.connector[key] = value
        return self


def _describe_override(item: str) -> str:
    if is_sensitive_key(item):
        head = re.split(r"[\s:=]", item.strip(), maxsplit=1)[0]
        return f"'{head} …'"
    return repr(item)


# ------------------------------------------------------------------------------------------
# entry points


def load_properties_file(path: str | Path) -> LoadedConfig:
    """Read a configuration file; the format comes from the extension, else from the content."""
    p = Path(path)
    src = str(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise ConfigError(f"{src}: cannot read file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{src}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    fmt = _EXTENSIONS.get(p.suffix.lower())
    loaded = parse_text(text, fmt, source=src)
    loaded.source_path = p
    return loaded


def parse_text(text: str, fmt: str | None = None, *, source: str = "<text>") -> LoadedConfig:
    """Parse configuration text in ``fmt`` ("properties", "json", "yaml"; None = sniff)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if fmt is None:
        fmt = sniff_format(text)
    if fmt not in FORMATS:
        raise ConfigError(f"{source}: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    warnings: list[str] = []
    name: str | None = None
    if fmt == "properties":
        props, lines = _parse_properties(text, source, warnings)
    else:
        data = _parse_json(text, source) if fmt == "json" else _parse_yaml(text, source)
        props, name = _from_document(data, source, warnings)
        lines = {}
    return _split_layout(props, lines, name, source, warnings)


def sniff_format(text: str) -> str:
    """Guess the format of configuration text."""
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return "json"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        if line == "---" or line.startswith("- ") or raw[:1] in (" ", "\t") or line.endswith(":"):
            return "yaml"
        eq, colon = line.find("="), line.find(":")
        if eq != -1 and (colon == -1 or eq < colon):
            return "properties"
    return "properties"


# ------------------------------------------------------------------------------------------
# Debezium Server layout


def _split_layout(
    props: dict[str, str], lines: dict[str, int], name: str | None, source: str, warnings: list[str]
) -> LoadedConfig:
    loaded = LoadedConfig(name=name, warnings=warnings)
    if not any(k.startswith(SERVER_PREFIX) for k in props):
        loaded.connector = props
        return loaded
    loaded.server_layout = True
    for key, value in props.items():
        where = f"{source}:{lines[key]}" if key in lines else source
        if key.startswith(SERVER_PREFIX):
            loaded.route(key, value, where=where)
        else:
            loaded.warnings.append(
                f"{where}: ignored '{key}': a Debezium Server file takes connector properties under 'debezium.source.'"
            )
    return loaded


# ------------------------------------------------------------------------------------------
# java.util.Properties


_WS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _parse_properties(text: str, source: str, warnings: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """Parse like ``java.util.Properties.load``; returns (properties, key -> line number)."""
    natural = re.split(r"\r\n|\r|\n", text)
    props: dict[str, str] = {}
    where: dict[str, int] = {}
    problems: list[str] = []
    i = 0
    while i < len(natural):
        first = natural[i].lstrip(_WS)
        lineno = i + 1
        i += 1
        if not first or first[0] in "#!":
            continue
        logical = first
        while _continues(logical):
            logical = logical[:-1]
            if i >= len(natural):
                break
            logical += natural[i].lstrip(_WS)
            i += 1
        try:
            parsed = _split_key_value(logical)
        except ValueError as e:
            problems.append(f"{source}:{lineno}: {e}")
            continue
        if parsed is None:
            problems.append(f"{source}:{lineno}: expected key=value")
            continue
        key, value = parsed
        if key in props:
            warnings.append(
                f"{source}:{lineno}: property '{key}' is also set on line {where[key]}; the last value is used"
            )
            del props[key]
        props[key] = value
        where[key] = lineno
    if problems:
        raise ConfigError(problems, source=source)
    return props, where


def _continues(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str) -> tuple[str, str] | None:
    """Split a logical line into (key, value); None when there is no separator and no value."""
    j = 0
    n = len(line)
    while j < n:
        c = line[j]
        if c == "\\":
            j += 2
            continue
        if c in "=:" or c in _WS:
            break
        j += 1
    key_part = line[:j]
    rest = line[j:]
    separated = False
    k = 0
    while k < len(rest) and rest[k] in _WS:
        k += 1
        separated = True
    if k < len(rest) and rest[k] in "=:":
        k += 1
        separated = True
        while k < len(rest) and rest[k] in _WS:
            k += 1
    value_part = rest[k:]
    if not key_part:
        raise ValueError("expected key=value (the key is empty)")
    if not separated and not value_part:
        return None
    return _unescape(key_part), _unescape(value_part)


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(s):
            break  # a lone trailing backslash is dropped
        nxt = s[i + 1]
        if nxt == "u":
            hexdigits = s[i + 2 : i + 6]
            if len(hexdigits) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                raise ValueError("malformed \\uxxxx escape")
            out.append(chr(int(hexdigits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


# ------------------------------------------------------------------------------------------
# JSON / YAML documents


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None


class _StringScalarLoader(yaml.SafeLoader):
    """SafeLoader that keeps numbers, dates and YAML-1.1 booleans (yes/on/...) as written."""


def _as_text(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


def _bool_or_text(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    text = loader.construct_scalar(node)  # type: ignore[arg-type]
    low = str(text).lower()
    return {"true": True, "false": False}.get(low, text)


for _tag in ("int", "float", "timestamp"):
    _StringScalarLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _as_text)
_StringScalarLoader.add_constructor("tag:yaml.org,2002:bool", _bool_or_text)


def _parse_yaml(text: str, source: str) -> Any:
    try:
        docs = [d for d in yaml.load_all(text, Loader=_StringScalarLoader) if d is not None]
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        pos = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        what = e.problem or e.context or "syntax error"
        raise ConfigError(f"{source}{pos}: invalid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: invalid YAML: {e}") from None
    if len(docs) > 1:
        raise ConfigError(f"{source}: expected one YAML document, found {len(docs)}")
    return docs[0] if docs else {}


def _from_document(data: Any, source: str, warnings: list[str]) -> tuple[dict[str, str], str | None]:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of properties at the top level")
    name: str | None = None
    body: Any = data
    if isinstance(data.get("config"), dict):  # Kafka Connect shape {"name": ..., "config": {...}}
        body = data["config"]
        if data.get("name") is not None:
            name = _scalar_text(data["name"])
        for k in data:
            if k not in ("name", "config"):
                warnings.append(f"{source}: ignored top-level '{k}' (only 'name' and 'config' are used)")
    out: dict[str, str] = {}
    problems: list[str] = []
    _flatten(body, "", out, problems, source)
    if problems:
        raise ConfigError(problems, source=source)
    return out, name


def _flatten(obj: Mapping[Any, Any], prefix: str, out: dict[str, str], problems: list[str], source: str) -> None:
    for k, v in obj.items():
        key = f"{prefix}{_scalar_text(k)}"
        if isinstance(v, dict):
            if not v:
                problems.append(f"{source}: '{key}' is an empty mapping; expected a value")
            _flatten(v, f"{key}.", out, problems, source)
            continue
        if key in out:
            problems.append(f"{source}: property '{key}' is given twice")
            continue
        if isinstance(v, list):
            if any(isinstance(x, dict | list) for x in v):
                problems.append(f"{source}: property '{key}': a list may hold only plain values")
                continue
            out[key] = join_list(_scalar_text(x) for x in v)
        else:
            out[key] = _scalar_text(v)


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)
