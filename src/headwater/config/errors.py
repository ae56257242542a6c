"""The single error type raised for any configuration problem."""

from __future__ import annotations

from collections.abc import Iterable


class ConfigError(Exception):
    """One or more configuration problems, reported together.

    ``problems`` holds one human-readable line per problem; each names the property (or the
    file and line) at fault. Password values never appear in a problem.
    """

    def __init__(self, problems: str | Iterable[str], *, source: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [problems]
        self.problems: list[str] = [str(p) for p in problems]
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        n = len(self.problems)
        where = f" in {self.source}" if self.source else ""
        head = f"invalid configuration{where}: {n} problem{'s' if n != 1 else ''}"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])

    def __str__(self) -> str:
        return self._render()

    def one_line(self) -> str:
        """All problems on one line, for command-line error messages."""
        where = f" in {self.source}" if self.source else ""
        return f"invalid configuration{where}: " + "; ".join(self.problems)

    @classmethod
    def combine(cls, errors: Iterable[ConfigError], *, source: str | None = None) -> ConfigError:
        """Merge several errors into one (problems in order)."""
        problems: list[str] = []
        for err in errors:
            problems.extend(err.problems)
        return cls(problems, source=source)
