"""native/usemem.c: usemem's do_rw_once loop, run on the host (behaviour, never timing)."""

from __future__ import annotations

import mmap
import time

import numpy as np
import pytest

from mmsim.native import tasks, usemem

pytestmark = pytest.mark.skipif(not usemem.available(), reason="no C compiler")


def test_write_stores_the_index_in_every_word() -> None:
    m = tasks.map_anon(1 << 20, "never")
    assert usemem.rw_once(m, read=False) == 1 << 20
    a = np.frombuffer(m, dtype=np.uint64)
    assert np.array_equal(a, np.arange(len(a), dtype=np.uint64))
    del a
    m.close()


def test_read_of_an_untouched_mapping_reads_every_word() -> None:
    m = tasks.map_anon(1 << 20, "never", readonly=True)
    assert usemem.rw_once(m, read=True) == 1 << 20
    m.close()


def test_random_writes_as_many_words_as_the_mapping_holds() -> None:
    m = tasks.map_anon(256 << 10, "never")
    assert usemem.rw_once(m, read=False, random_seed=7) == 256 << 10
    a = np.frombuffer(m, dtype=np.uint64)
    hit = np.flatnonzero(a)
    assert len(hit) > 0 and np.array_equal(a[hit], hit.astype(np.uint64))  # p[idx] = idx
    del a
    m.close()


def test_a_past_deadline_stops_at_the_first_check() -> None:
    # runtime_exceeded() is tested when !(i & 0xffff): at i = 0, so one word is done
    m = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    assert usemem.rw_once(m, read=False, deadline=time.perf_counter() - 1.0) == 8
    m.close()


def test_blocks_write_every_word_and_time_only_whole_blocks() -> None:
    m = tasks.map_anon(5 << 20, "never")
    done, rate = usemem.rw_blocks(m, read=False, block=2 << 20)  # two timed blocks and an untimed 1 MiB tail
    assert done == 5 << 20 and rate > 0
    a = np.frombuffer(m, dtype=np.uint64)
    words = (2 << 20) // 8  # each block's do_rw_once starts its index at 0, as a fresh call does
    assert np.array_equal(a[:words], np.arange(words, dtype=np.uint64))
    assert np.array_equal(a[words:2 * words], np.arange(words, dtype=np.uint64))
    del a
    # a mapping smaller than a block is one block
    assert usemem.rw_blocks(m, read=False, block=64 << 20)[0] == 5 << 20
    m.close()


def test_a_block_cut_short_by_the_deadline_is_not_timed() -> None:
    m = mmap.mmap(-1, 4 << 20, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    assert usemem.rw_blocks(m, read=False, deadline=time.perf_counter() - 1.0, block=1 << 20) == (8, 0.0)
    m.close()


def test_cached_loop_time_is_positive() -> None:
    assert usemem.cached_ns_per_word(reps=200) > 0


def test_pmbench_port_reports_rate_mean_median_and_cpu_rate() -> None:
    # native/mb.c pmbench: every access timed by its own rdtscp pair, as pmbench's histogram_access
    from mmsim.native import microbench as mb

    exe = mb.helper()
    if exe is None:
        pytest.skip("no C compiler")
    import subprocess

    out = subprocess.run([str(exe), "pmbench", str(8 << 20), str(4 << 20), "0.05", "50"], capture_output=True,
                         text=True, timeout=60, check=True).stdout.split()
    rate, mean_ns, median_ns, cpu_rate = (float(x) for x in out)
    assert rate > 0 and mean_ns > 0 and median_ns > 0 and cpu_rate >= rate * 0.99
    assert mb.pmbench_rate(8 << 20, 4 << 20, 0.05, 50) is not None
