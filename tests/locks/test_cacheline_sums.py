"""CacheLine keeps its spinner sums per socket (O(sockets) per update): they must
equal the brute-force sums over every pair of spinner CPUs (non-inclusive LLC:
the storm is a chain of core-to-core forwards) or of spinner sockets (inclusive
L3: one forward per socket, the others L3 hits), through adds and removes."""

from __future__ import annotations

import random

import pytest

from mmsim.locks.base import SHARED, CacheLine
from mmsim.machine import get_machine
from mmsim.machine.cacheorg import cache_org


def _pause_first(machine_name: str, n: int) -> float:
    """The first re-read's wait for the first of ``n`` spinners to end its PAUSE: P / (n + 1) (session 35)."""
    m = get_machine(machine_name)
    return cache_org(machine_name).pause_cycles / m.freq_ghz / (n + 1)


def _brute(machine_name: str, spinners: list[int]) -> tuple[float, float]:
    """(sum over ordered pairs of distinct spinner instances of HIT, the same for HITM from cpu 0)."""
    m = get_machine(machine_name)
    pairs = sum(m.xfer_ns(a, b, modified=False) for i, a in enumerate(spinners) for j, b in enumerate(spinners)
                if i != j)
    return pairs, sum(m.xfer_ns(0, b, modified=True) for b in spinners)


def _walk(machine_name: str, steps: int = 300):  # type: ignore[no-untyped-def]
    """Random adds and removes (repeats of one CPU included); yields (line, live spinners) every 25 steps."""
    m = get_machine(machine_name)
    line = CacheLine(m, owner=5)
    rnd = random.Random(7)
    live: list[int] = []
    for step in range(steps):
        if live and rnd.random() < 0.4:
            cpu = live.pop(rnd.randrange(len(live)))
            line.remove_spinner(cpu)
        else:
            cpu = rnd.randrange(m.ncpus) if rnd.random() < 0.8 else (live[0] if live else 1)  # repeats: same CPU
            line.add_spinner(cpu)
            live.append(cpu)
        if step % 25 == 0 and len(live) > 1:
            yield line, live


@pytest.mark.parametrize("machine_name", ["icelake-6338-2s", "cooperlake-8380h-4s"])
def test_sums_match_brute_force(machine_name: str) -> None:
    assert not CacheLine(get_machine(machine_name)).costs.by_socket
    for line, live in _walk(machine_name):
        n = len(live)
        pairs, first0 = _brute(machine_name, live)
        assert line._pairs == pytest.approx(pairs, rel=1e-9)
        got_first, got_rest, got_mid = line.storm(0)
        assert got_first == pytest.approx(first0 / n + _pause_first(machine_name, n), rel=1e-12)
        assert got_rest == pytest.approx(pairs / n, rel=1e-9)  # (n - 1) forwards at the mean pair HIT
        assert got_mid == pytest.approx(pairs / n / 2, rel=1e-9)


@pytest.mark.parametrize("machine_name", ["xeon-e5-2699v3-2s", "sgi-uv2000-512"])
def test_inclusive_l3_storm_is_one_forward_per_socket(machine_name: str) -> None:
    m = get_machine(machine_name)
    l3 = m.cache("L3").latency_ns
    assert CacheLine(m).costs.by_socket
    for line, live in _walk(machine_name):
        n = len(live)
        socks = sorted({m.cpu_socket(c) for c in live})
        k = len(socks)
        first_cpu = {s: next(c for c in range(m.ncpus) if m.cpu_socket(c) == s) for s in socks}
        hit = {(a, b): m.xfer_ns(first_cpu[a], first_cpu[b], modified=False)
               for a in socks for b in socks if a != b}
        _pairs, first0 = _brute(machine_name, live)
        got_first, got_rest, got_mid = line.storm(0)
        assert got_first == pytest.approx(first0 / n + _pause_first(machine_name, n), rel=1e-12)
        rest = (k - 1) * sum(hit.values()) / len(hit) if k > 1 else 0.0
        assert got_rest == pytest.approx(rest, rel=1e-9, abs=1e-9)
        # a socket's cores read its L3 one after another (same-address requests do not pass in the CBo);
        # SMT siblings share their core's request
        core_of = m._cpu_core  # type: ignore[attr-defined]
        cores = {s: {core_of[c] for c in live if m.cpu_socket(c) == s} for s in socks}
        per_sock = {s: sum(1 for c in live if m.cpu_socket(c) == s) for s in socks}
        local = sum(per_sock[s] * (len(cores[s]) - 1) for s in socks) / (2 * n) * l3
        assert got_mid == pytest.approx(rest / 2 + local, rel=1e-9)


def test_shared_rfo_is_the_mean_over_the_storm_readers() -> None:
    """After a storm, the next RFO costs the mean HIT from the storm's readers, however
    the spinner set changed since (the log of changes is undone)."""
    m = get_machine("sgi-uv2000-512")
    line = CacheLine(m, owner=0)
    readers = [3, 40, 41, 200, 511]
    for c in readers:
        line.add_spinner(c)
    line.write(7, 0)
    assert line.owner == SHARED
    line.remove_spinner(40)
    line.add_spinner(300)
    line.add_spinner(3)
    want = sum(m.xfer_ns(j, 100, modified=False) for j in readers) / len(readers)
    assert line.rfo_ns(100) == pytest.approx(want, rel=1e-12)


def test_remove_without_add_is_an_error() -> None:
    line = CacheLine(get_machine("tiny"))
    with pytest.raises(RuntimeError, match="without add_spinner"):
        line.remove_spinner(1)
