"""native/userloop.py and its C entry points in native/usemem.c (usemem's loop with another step, whole-pass
CPU time, clflush)."""

from __future__ import annotations

import ctypes
import math

import pytest

from mmsim.native import usemem, userloop

pytestmark = pytest.mark.skipif(not usemem.available(), reason="no C compiler")


def test_step_4096_touches_one_word_per_page() -> None:
    d = userloop._lib()
    r = userloop.Region(64 << 10)
    try:
        d.usemem_set_step(4096)
        assert d.usemem_rw_once(r.addr, 64 << 10, 0) == 16 * 8  # 16 pages, one 8-byte word each
        d.usemem_set_step(8)
        assert d.usemem_rw_once(r.addr, 64 << 10, 0) == 64 << 10
        d.usemem_flush(r.addr, 64 << 10)  # the lines leave the caches; the data stays
        words = (ctypes.c_ulong * 8).from_address(r.addr)
        assert list(words) == list(range(8))  # do_access stores the word's index
    finally:
        d.usemem_set_step(8)
        r.close()


def test_loop_cost_is_the_pass_less_the_faults() -> None:
    c = userloop.loop_cost("zero-read-fault", 4 << 20, reps=1)
    assert c.loop_ns == c.pass_ns - c.faults_ns
    assert math.isclose(c.ns_per_word, c.loop_ns / 511)
    assert c.faults_ns > 0  # (behaviour only: no timing is asserted)
