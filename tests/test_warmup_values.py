"""MSER-5 (derive.mser) where mutation testing found it unchecked: the exact error lines, a series holding None (a
step with no value), and warmup_end passing its batch size on."""

import re

import pytest

from scalestudy.derive import mser, warmup_end

ZIGZAG = [0] * 5 + [10] * 5 + [12] * 5 + [10] * 5 + [12] * 5 + [10] * 5 + [12] * 5 + [10] * 5


def test_the_error_lines_are_exact():
    with pytest.raises(ValueError, match=r"^warm-up of an empty series$"):
        mser([])
    with pytest.raises(ValueError, match=r"^warm-up of a series with missing or infinite values$"):
        mser([1.0, float("inf")] * 10)


def test_a_step_without_a_value_is_missing_not_a_type_error():
    # None (a step the log did not print) reads as NaN: the same one line as a NaN, not NumPy's TypeError
    with pytest.raises(ValueError, match=re.escape("warm-up of a series with missing or infinite values")):
        mser([100.0, None] * 10)


def test_warmup_end_passes_its_batch_size_on():
    # tests/test_warmup.py: ZIGZAG cuts at step 5 in batches of 5, at step 8 in batches of 4
    assert warmup_end(ZIGZAG) == 5
    assert warmup_end(ZIGZAG, batch=4) == 8
