"""pgoutput's text values as the typed Arrow values the Delta sink stores (streamDelivery=rows):
exact, or refused (the run then goes as events)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from headwater.connectors.postgres.typed_changes import _typed


def test_text_values_become_the_stored_types():
    def typed(values, arrow):
        return _typed(pa.array(values, pa.string()), arrow).to_pylist()

    assert typed(["t", "f", None], pa.bool_()) == [True, False, None]
    assert typed(["-32768", None], pa.int16()) == [-32768, None]
    assert typed(["1234567890.12", "-0.01"], pa.decimal128(12, 2)) == [Decimal("1234567890.12"), Decimal("-0.01")]
    assert typed(["2024-02-29"], pa.date32()) == [dt.date(2024, 2, 29)]
    assert typed(["1969-12-31 23:59:59.999999"], pa.timestamp("us")) == [dt.datetime(1969, 12, 31, 23, 59, 59, 999999)]
    assert typed(["2024-01-01 06:30:00.5+00"], pa.timestamp("us", tz="UTC")) == [
        dt.datetime(2024, 1, 1, 6, 30, 0, 500000, tzinfo=dt.UTC)]
    assert typed(["multi\nline, \"q\"", ""], pa.string()) == ["multi\nline, \"q\"", ""]


@pytest.mark.parametrize(("text", "arrow"), [
    ("NaN", pa.decimal128(10, 3)), ("infinity", pa.timestamp("us")), ("2024-01-01 BC", pa.date32()),
    ("1.2345", pa.decimal128(10, 3)), ("yes", pa.bool_()), ("70000", pa.int16()),
])
def test_values_without_an_exact_typed_form_are_refused(text, arrow):
    with pytest.raises((pa.ArrowInvalid, pa.ArrowNotImplementedError)):
        _typed(pa.array(["1" if arrow != pa.bool_() else "t", text], pa.string()), arrow)
