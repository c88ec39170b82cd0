"""Sub-page order of clear_huge_page / copy_user_huge_page against the kernel's loops.

``process_huge_page()`` (mm/memory.c, v4.18; inline in ``clear_huge_page``
since c79b57e462b5, v4.14): with ``n = target``, if ``2n <= 512`` process
511 down to 2n, else 0 up to ``base - 1`` with ``base = 512 - 2(512 - n)``;
then pairs ``base + i``, ``base + 2l - 1 - i`` for ``i < l``.
"""

from __future__ import annotations

import pytest

from mmsim.mm.memory import huge_page_order


def test_sequential_is_zero_to_511() -> None:
    assert huge_page_order("sequential", 300).tolist() == list(range(512))


def test_target_at_start_is_reverse_order() -> None:
    # n = 0: 511 .. 0 by the tail loop, no pairs.
    assert huge_page_order("target-last", 0).tolist() == list(range(511, -1, -1))


def test_target_in_middle() -> None:
    # n = 100: tail 511 .. 200, then (0, 199), (1, 198), ..., (99, 100).
    want = list(range(511, 199, -1))
    for i in range(100):
        want += [i, 199 - i]
    assert huge_page_order("target-last", 100).tolist() == want
    # n = 256 (2n == 512 takes the first branch): no tail, pairs (0, 511) .. (255, 256).
    want = [x for i in range(256) for x in (i, 511 - i)]
    assert huge_page_order("target-last", 256).tolist() == want


def test_target_at_end() -> None:
    # n = 511: base = 512 - 2 * 1 = 510, l = 1: head 0 .. 509, then (510, 511).
    assert huge_page_order("target-last", 511).tolist() == list(range(510)) + [510, 511]
    # n = 400: base = 512 - 224 = 288, l = 112: head 0 .. 287, pairs (288, 511) .. (399, 400).
    want = list(range(288)) + [x for i in range(112) for x in (288 + i, 511 - i)]
    assert huge_page_order("target-last", 400).tolist() == want


@pytest.mark.parametrize("target", [0, 1, 77, 255, 256, 257, 400, 510, 511])
def test_every_order_is_a_permutation_ending_at_the_target(target: int) -> None:
    o = huge_page_order("target-last", target).tolist()
    assert sorted(o) == list(range(512))
    assert o[-1] == target


def test_bad_policy_and_target() -> None:
    with pytest.raises(ValueError, match="sequential, target-last"):
        huge_page_order("random", 0)
    with pytest.raises(ValueError, match="outside"):
        huge_page_order("target-last", 512)
