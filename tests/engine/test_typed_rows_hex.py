"""hex_digits, the digits of every position typed rows carry, gives Python's upper-case hex
(``f"{n:016X}"``) for any unsigned 64-bit number."""

from __future__ import annotations

import random

import numpy as np
import pytest

from headwater.engine.typed_rows import hex_digits


@pytest.mark.parametrize("digits", [8, 16])
def test_hex_digits_are_pythons_upper_case_hex(digits):
    rng = random.Random(5)
    top = (1 << (4 * digits)) - 1
    numbers = [0, 1, 9, 10, 15, 16, 0xA0, 0x9F, top, top - 1, 1 << (4 * digits - 1)]
    numbers += [rng.randint(0, top) for _ in range(2_000)]
    text = hex_digits(np.array(numbers, dtype=np.uint64), digits)
    assert text.shape == (len(numbers), digits)
    assert [bytes(row).decode() for row in text] == [f"{n:0{digits}X}" for n in numbers]


def test_no_numbers_no_digits():
    assert hex_digits(np.array([], dtype=np.uint64), 16).shape == (0, 16)
