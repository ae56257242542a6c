"""Loading user plug-ins (custom converters, custom snapshot queries) named in the configuration.

Debezium names a Java class (`io.debezium.test.IsbnConverter`); Headwater runs Python and names
a class as `package.module:Class`. A name without `:` is taken for a Java class and refused.
Plug-ins are created from their names wherever they are used (the standalone runner's process,
its encoding workers, Spark executors), so only the names and settings travel.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_PYTHON_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class PluginError(Exception):
    """A plug-in cannot be loaded, created or used; the message says which and why (one line)."""


def load_class(spec: str, prop: str, what: str, methods: tuple[str, ...]) -> type:
    """The class `spec` (`package.module:Class`) names; `prop` is the property that names it and
    `what` the plug-in it should be (for the messages); the class must define `methods`."""
    text = spec.strip()
    module_name, sep, class_name = text.partition(":")
    if not sep:
        raise PluginError(
            f"{prop}={text!r} looks like a Java class name: Headwater runs plug-ins written in Python; name "
            f"the Python {what} class as package.module:Class")
    if not _PYTHON_NAME.fullmatch(module_name) or not _PYTHON_NAME.fullmatch(class_name):
        raise PluginError(f"{prop}={text!r}: expected package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises while it is imported
        raise PluginError(f"{prop}={text!r}: cannot import module {module_name!r}: {error_reason(exc)}") from None
    target: Any = module
    for part in class_name.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise PluginError(f"{prop}={text!r}: module {module_name!r} has no {class_name!r}")
    if not isinstance(target, type):
        raise PluginError(f"{prop}={text!r}: {class_name!r} is not a class")
    missing = [m for m in methods if not callable(getattr(target, m, None))]
    if missing:
        raise PluginError(f"{prop}={text!r}: {class_name} is not a {what}: it has no method "
                          f"{', '.join(missing)} (a {what} defines {', '.join(methods)})")
    return target


def instantiate(cls: type, prop: str, spec: str) -> Any:
    try:
        return cls()
    except Exception as exc:
        raise PluginError(f"{prop}={spec.strip()!r}: creating {cls.__name__}() failed: {error_reason(exc)}") from None


def error_reason(exc: BaseException) -> str:
    """An exception in one line: its class and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
