"""The warm-up rule (scalestudy.warmup), on series whose end of warm-up is known."""

import pytest

from scalestudy.warmup import warmup_end


def test_warmup_end():
    # steady state = median of the second half = 100; 10 % tolerance -> first value >= 90 is index 3
    series = [10, 40, 85, 95, 100, 99, 101, 100]
    assert warmup_end(series, tolerance=0.10) == 3
    assert warmup_end([100, 100, 100, 100]) == 0
    with pytest.raises(ValueError):
        warmup_end([])
