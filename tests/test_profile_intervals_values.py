"""profile/intervals.py by hand at its edges: open window sides, intervals touching the window or each other,
unsorted input."""

import numpy as np

from scalestudy.profile.intervals import clip, merged, overlap_length, overlapping_groups, union_length


def test_clip_keeps_what_overlaps_the_window_and_cuts_it():
    starts, ends = np.array([0, 2, 5, 9]), np.array([2, 4, 8, 10])
    s, e, kept = clip(starts, ends, 2, 9)
    # [0,2] ends at the window's start and [9,10] starts at its end: they do not overlap it
    assert kept.tolist() == [False, True, True, False]
    assert s.tolist() == [2.0, 5.0] and e.tolist() == [4.0, 8.0]
    s, e, kept = clip(starts, ends, 3, None)  # open on the right
    assert kept.tolist() == [False, True, True, True] and s.tolist() == [3.0, 5.0, 9.0] and e.tolist() == [4, 8, 10]
    s, e, kept = clip(starts, ends, None, 1)  # open on the left
    assert kept.tolist() == [True, False, False, False] and s.tolist() == [0.0] and e.tolist() == [1.0]
    s, e, kept = clip(starts, ends, None, None)
    assert kept.all() and s.tolist() == [0, 2, 5, 9] and e.tolist() == [2, 4, 8, 10]


def test_merged_joins_touching_and_nested_intervals_in_any_order():
    # [5,6] given first; [0,2] and [2,3] touch: one; [1,1.5] inside it
    assert merged([5, 2, 0, 1], [6, 3, 2, 1.5]) == [(0.0, 3.0), (5.0, 6.0)]
    assert merged([0, 1], [10, 2]) == [(0.0, 10.0)]  # a later interval that ends earlier keeps the first end
    assert union_length([5, 2, 0, 1], [6, 3, 2, 1.5]) == 4.0
    assert overlapping_groups([5, 2, 0, 1], [6, 3, 2, 1.5]) == 2
    assert merged([], []) == [] and union_length([], []) == 0.0


def test_overlap_length_inside_a_window():
    # [0,3] and [5,6] inside [2,5.5]: 1 + 0.5
    assert overlap_length([5, 2, 0], [6, 3, 2], 2, 5.5) == 1.5
    assert overlap_length([0], [10], 2, 4) == 2.0
