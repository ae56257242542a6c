"""A validated, typed view of flat ``dict[str, str]`` properties."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from headwater.config.errors import ConfigError
from headwater.config.fields import (
    MASK,
    DynamicField,
    Field,
    FieldSet,
    FieldType,
    Report,
    is_sensitive_key,
    split_list,
)

log = logging.getLogger("headwater.config")

_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)
_MISSING: Any = object()


class _ConversionError(Exception):
    pass


def to_property_string(value: Any) -> str:
    """Render a programmatic value the way it would be written in a properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        from headwater.config.fields import join_list

        return join_list(to_property_string(v) for v in value)
    return str(value)


def _convert(ftype: FieldType, text: str) -> Any:
    """Convert one raw string; raises _ConversionError with 'expected ...' text."""
    if ftype in (FieldType.STRING, FieldType.PASSWORD, FieldType.CLASS):
        return text if ftype is FieldType.PASSWORD else text.strip()
    s = text.strip()
    if ftype in (FieldType.INT, FieldType.LONG):
        lo, hi = _INT_RANGE if ftype is FieldType.INT else _LONG_RANGE
        if not s or "_" in s:
            raise _ConversionError("expected an integer")
        try:
            n = int(s, 10)
        except ValueError:
            raise _ConversionError("expected an integer") from None
        if not lo <= n <= hi:
            kind = "a 32-bit integer" if ftype is FieldType.INT else "a 64-bit integer"
            raise _ConversionError(f"expected {kind} (between {lo} and {hi})")
        return n
    if ftype is FieldType.DOUBLE:
        try:
            if "_" in s:
                raise ValueError
            return float(s)
        except ValueError:
            raise _ConversionError("expected a number") from None
    if ftype is FieldType.BOOLEAN:
        low = s.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        raise _ConversionError("expected true or false")
    if ftype is FieldType.LIST:
        return split_list(text)
    raise AssertionError(ftype)  # ENUM is handled by the caller


def _describe_value(key: str, text: str, sensitive: bool) -> str:
    return f"invalid value for property '{key}'" if sensitive else f"invalid value '{text}' for property '{key}'"


class Configuration:
    """Validated properties. Build with :meth:`build`; read with :meth:`get` or ``cfg[name]``."""

    def __init__(
        self,
        fields: FieldSet,
        raw: Mapping[str, str],
        values: dict[str, Any],
        explicitly_set: set[str],
        dynamic_values: dict[str, Any],
        warnings: list[str],
    ) -> None:
        self.fields = fields
        self._raw = dict(raw)
        self._values = values
        self._set = explicitly_set
        self._dynamic = dynamic_values
        self.warnings: list[str] = warnings

    # ---------------------------------------------------------------------------------------
    # building

    @classmethod
    def build(
        cls,
        raw: Mapping[str, Any],
        fields: FieldSet,
        *,
        allow_prefixes: Iterable[str] = (),
        source: str | None = None,
    ) -> Configuration:
        """Validate ``raw`` against ``fields``; raise one ConfigError listing every problem."""
        props = {str(k): to_property_string(v) for k, v in raw.items()}
        errors: list[str] = []
        warnings: list[str] = []
        failed: set[str] = set()
        values: dict[str, Any] = {}
        explicitly_set: set[str] = set()
        dynamic_values: dict[str, Any] = {}
        pending: list[str] = []
        # canonical name -> the key it was read from (a deprecated name or itself)
        origin: dict[str, str] = {}

        # pass 1: known fields and deprecated names
        for key in props:
            f = fields.get(key)
            if f is None:
                f = fields.by_deprecated_name(key)
                if f is not None:
                    if f.name in props:
                        errors.append(f"both '{key}' (deprecated) and '{f.name}' are set; remove '{key}'")
                        continue
                    warnings.append(f"property '{key}' is deprecated; use '{f.name}' instead")
            if f is None:
                pending.append(key)
                continue
            origin[f.name] = key
            explicitly_set.add(f.name)
            ok, value = cls._convert_field(f, key, props[key], errors, warnings)
            if ok:
                values[f.name] = value
            else:
                failed.add(f.name)
            if f.ignored_reason:
                warnings.append(f"property '{key}' is ignored: {f.ignored_reason}")

        # prefixes opened by values (e.g. converters=isbn -> isbn.*)
        value_prefixes: list[str] = []
        for f in fields:
            if f.names_prefixes and f.name in values:
                value_prefixes.extend(f"{item}." for item in values[f.name])
        prefixes = tuple(allow_prefixes) + tuple(value_prefixes)

        # pass 2: dynamic families, allowed prefixes, unknown keys
        candidates = fields.names()
        for key in pending:
            d = fields.dynamic_for(key)
            if d is not None:
                explicitly_set.add(key)
                ok, value = cls._convert_dynamic(d, key, props[key], errors)
                if ok:
                    dynamic_values[key] = value
                else:
                    failed.add(key)
                if d.ignored_reason:
                    warnings.append(f"property '{key}' is ignored: {d.ignored_reason}")
                continue
            if any(key.startswith(p) for p in prefixes):
                explicitly_set.add(key)
                dynamic_values[key] = props[key]
                continue
            close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            errors.append(f"unknown property '{key}'{hint}")

        # missing required
        for f in fields:
            if not f.required:
                continue
            v = values.get(f.name, f.default if f.default is not None else _MISSING)
            if f.name in failed:
                continue
            if v is _MISSING or v is None or (isinstance(v, str | list) and not v):
                doc = f": {f.doc}" if f.doc else ""
                errors.append(f"missing required property '{f.name}'{doc}")
                failed.add(f.name)

        cfg = cls(fields, props, values, explicitly_set, dynamic_values, warnings)

        # cross-field checks
        report = Report(failed)
        for check in fields.checks:
            check(cfg, report)
        errors.extend(report.errors)
        warnings.extend(report.warnings)

        if errors:
            raise ConfigError(errors, source=source)
        for w in warnings:
            log.warning("%s", w)
        return cfg

    @staticmethod
    def _convert_field(f: Field, key: str, text: str, errors: list[str], warnings: list[str]) -> tuple[bool, Any]:
        sensitive = f.sensitive or is_sensitive_key(key)
        if f.type is FieldType.ENUM:
            s = text.strip().lower()
            if s in f.unsupported:
                errors.append(f.unsupported[s])
                return False, None
            if s in f.aliases:
                target = f.aliases[s]
                warnings.append(f"value '{s}' for property '{key}' is deprecated; use '{target}' instead")
                value: Any = target
            elif s in f.allowed:
                value = s
            else:
                aliases = "".join(f" ({a} is a deprecated alias of {t})" for a, t in f.aliases.items())
                errors.append(
                    f"{_describe_value(key, text, sensitive)}: allowed values are {', '.join(f.allowed)}{aliases}"
                )
                return False, None
        else:
            try:
                value = _convert(f.type, text)
            except _ConversionError as e:
                errors.append(f"{_describe_value(key, text, sensitive)}: {e}")
                return False, None
        if f.validator is not None:
            msg = f.validator(value)
            if msg:
                errors.append(f"{_describe_value(key, text, sensitive)}: {msg}")
                return False, None
        return True, value

    @staticmethod
    def _convert_dynamic(d: DynamicField, key: str, text: str, errors: list[str]) -> tuple[bool, Any]:
        sensitive = d.type is FieldType.PASSWORD or is_sensitive_key(key)
        if d.key_validator is not None:
            msg = d.key_validator(key)
            if msg:
                errors.append(f"invalid property name '{key}': {msg}")
                return False, None
        try:
            value = _convert(d.type, text)
        except _ConversionError as e:
            errors.append(f"{_describe_value(key, text, sensitive)}: {e}")
            return False, None
        if d.validator is not None:
            msg = d.validator(value)
            if msg:
                errors.append(f"{_describe_value(key, text, sensitive)}: {msg}")
                return False, None
        return True, value

    # ---------------------------------------------------------------------------------------
    # access

    def get(self, name: str, default: Any = _MISSING) -> Any:
        """The converted value of ``name``, or the field's default.

        For a dynamic-prefix property (``column.mask.with.5.chars``) the converted value when set.
        ``default`` is returned for a property that is neither a field nor set; without it that is a KeyError.
        """
        f = self.fields.get(name) or self.fields.by_deprecated_name(name)
        if f is not None:
            v = self._values.get(f.name, f.default)
            return list(v) if isinstance(v, list | tuple) and f.type is FieldType.LIST else v
        if name in self._dynamic:
            v = self._dynamic[name]
            return list(v) if isinstance(v, list) else v
        if default is not _MISSING:
            return default
        raise KeyError(f"no configuration property {name!r}")

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self.fields or name in self._dynamic)

    def is_set(self, name: str) -> bool:
        """True when the property was given explicitly (also via a deprecated name)."""
        return name in self._set

    @property
    def raw(self) -> dict[str, str]:
        """The properties as given (strings, original names). Contains secrets: never log it."""
        return dict(self._raw)

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """Raw properties under ``prefix``, with the prefix stripped."""
        return {k[len(prefix) :]: v for k, v in self._raw.items() if k.startswith(prefix) and k != prefix}

    def dynamic_keys(self) -> list[str]:
        """Every accepted property that is not a plain field (dynamic families, allowed prefixes)."""
        return list(self._dynamic)

    def items(self) -> Iterator[tuple[str, Any]]:
        """(name, value) for every field (defaults included), then every dynamic property."""
        for f in self.fields:
            yield f.name, self.get(f.name)
        yield from ((k, self.get(k)) for k in self._dynamic)

    def masked(self) -> dict[str, str]:
        """The raw properties with every secret replaced by ``********``."""
        out: dict[str, str] = {}
        for k, v in self._raw.items():
            f = self.fields.get(k) or self.fields.by_deprecated_name(k)
            secret = (f is not None and f.type is FieldType.PASSWORD) or is_sensitive_key(k)
            out[k] = MASK if secret else v
        return out

    def __repr__(self) -> str:
        return f"Configuration({self.masked()!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Configuration):
            return NotImplemented
        return self._raw == other._raw and self.fields.names() == other.fields.names()

    __hash__ = None  # type: ignore[assignment]
