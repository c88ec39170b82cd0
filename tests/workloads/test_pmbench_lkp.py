"""pmbench as LKP runs it (issue 18): normal_ih, CPU-less-node binding, eatmem, on ``tiny`` / ``tiny-pmem``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmsim.errors import UserError
from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.mm.system import System
from mmsim.workloads.base import get_workload, resolve_params
from mmsim.workloads.pmbench import PatternGen
from mmsim.workloads.pmbench_lkp import bindings
from mmsim.workloads.pmbench_pattern import irwin_hall_cdf, normal_ih_shape

LKP = {"processes": "5", "setsize": "256", "mapsize": "256", "pattern": "normal_ih", "ratio": "80", "cold": "1",
       "initialize": "1", "cpu_node_bind": "even", "eatmem": "600", "eatmem_node": "1", "duration": "30",
       "window": "10"}


def _run(machine: str, params: dict[str, str], **pol: str) -> tuple[System, dict[str, float], dict[int, int]]:
    w = get_workload("pmbench")
    p = resolve_params(w, params)
    s = System(get_machine(machine), resolve("v5.4", overrides={"thp": "never", **pol}), seed=0)
    free0 = {n: z.free_pages for n, z in enumerate(s.page_alloc.zones)}
    w.setup(s, p)
    s.engine.run()
    return s, w.metrics(s, p), free0


def test_normal_ih_draws_mean_half_and_sigma_a_twelfth() -> None:
    """pattern.c normal_ih: the mean of 12 uniform draws over the set. Irwin-Hall: the sum of 12 U(0, 1) has
    mean 6 and variance 12 / 12 = 1, so the mean of 12 U(0, n) has mean n / 2 and sigma n / 12: the issue's
    formula is right (up to pattern.c's rounding of n to 12 k and its shift)."""
    n = 12_001
    k = 200_000
    x = PatternGen("normal_ih", n, 1.0, np.random.default_rng(1)).draw(k).astype(np.float64)
    assert x.min() >= 0 and x.max() <= n - 1
    sigma = n / 12
    assert abs(x.mean() - n / 2) < 4 * sigma / math.sqrt(k)  # mean within 4 standard errors
    assert abs(x.std() / sigma - 1) < 4 / math.sqrt(2 * k)  # sd within 4 of its relative standard errors
    m, sd, shift = normal_ih_shape(n)
    assert (m, sd, shift) == (12_000, 1000, 0)  # pattern.c: k = (n_user + 5) / 12, n = 12 k, shift = (n_user - n)/2


def test_normal_ih_page_probabilities_match_the_draws() -> None:
    n = 6_001
    pr = PatternGen("normal_ih", n, 1.0, np.random.default_rng(0)).probs()
    assert pr.sum() == pytest.approx(1.0)
    j = np.arange(n)
    mean = float(pr @ j)
    sd = math.sqrt(float(pr @ (j - mean) ** 2))
    m, _sd, shift = normal_ih_shape(n)
    # floor(S / 12) + shift, E[S] = 12 (m - 1) / 2, the floor takes 11/24 off on average: n/2 - 1.46 here
    assert mean == pytest.approx((m - 1) / 2 - 11 / 24 + shift, abs=0.05)
    assert sd == pytest.approx(n / 12, rel=2e-3)
    assert irwin_hall_cdf(np.array([0.0, 6.0, 12.0])).tolist() == pytest.approx([0.0, 0.5, 1.0])


def test_cpuless_node_binding_the_process_never_starts() -> None:
    """numactl --cpunodebind=<CPU-less node>: an empty CPU mask, sched_setaffinity -EINVAL, numactl exits 1.
    LKP binds process i (1..n) to i % nr_node, nr_node counting the PMEM nodes: 1, 2, 3, 0, 1."""
    m = get_machine("tiny-pmem")
    b = bindings(m, 5, "even", 0)
    assert [n for n, _ in b] == [1, 2, 3, 0, 1]
    assert [c is None for _, c in b] == [False, True, True, False, False]
    assert [m.cpu_node(c) for _, c in b if c is not None] == [1, 0, 1]
    assert len({c for _, c in b if c is not None}) == 3  # one CPU each
    s, met, _ = _run("tiny-pmem", LKP, numa_balancing="1")
    assert (met["pmbench.processes_started"], met["pmbench.processes_failed"]) == (3, 2)
    assert len(s.mm_tasks) == 3  # only the started pmbench processes have an mm (main + worker each)
    assert all(len(v) == 2 for v in s.mm_tasks.values())


def test_two_processes_one_bound_to_a_cpuless_node() -> None:
    _, met, _ = _run("tiny-pmem", {**LKP, "processes": "2", "eatmem": "0"}, numa_balancing="1")  # nodes 1, 2
    assert (met["pmbench.processes_started"], met["pmbench.processes_failed"]) == (1, 1)
    _, met, _ = _run("tiny", {**LKP, "processes": "2", "eatmem": "0"}, numa_balancing="1")  # tiny: nodes 1, 0
    assert (met["pmbench.processes_started"], met["pmbench.processes_failed"]) == (2, 0)


@pytest.mark.parametrize("mode", ["1", "2"])
def test_eatmem_pages_are_never_migrated_or_scanned(mode: str) -> None:
    """eatmem's mlocked pages stay on node 1 through the window: the scanner walks only the pmbench maps
    and kswapd's demotion (tiering mode) takes only pmbench pages. Conservation on node 1:
    free + eatmem + PMEM memmap + pmbench pages = the free count before the setup."""
    pol = {"numa_balancing": mode}
    if mode == "2":
        pol["numa_balancing_hot_threshold_ms"] = "60000"  # promote, so that kswapd demotes
    s, met, free0 = _run("tiny-pmem", LKP, **pol)
    assert met["eatmem.pages"] == 600 * 256
    memmap = s.workload_state["memmap"][1]
    assert memmap == 2 * 262144 * 64 // 4096  # node 3's struct pages (2 GiB of 4 KiB pages, 64 B each)
    z1 = s.page_alloc.zones[1]
    assert z1.free_pages + met["eatmem.pages"] + memmap + met["pmbench.pages_node1"] == free0[1]
    assert met["pmbench.pages_node0"] + met["pmbench.pages_node1"] + met["pmbench.pages_node3"] == 3 * 65536
    # a scan walks its mm's VMAs once, so it sees each present PTE at most once: the map's 65,536 and the
    # worker's stack top page (glibc's allocate_stack), never eatmem's
    assert met["autonuma.scan_ptes_present"] <= met["autonuma.scans"] * (65536 + 1)
    if mode == "2":
        assert met["autonuma.pgdemote_kswapd"] > 0 and met["autonuma.pgpromote_success"] > 0


def test_the_acceptance_parameters_parse() -> None:
    w = get_workload("pmbench")
    p = resolve_params(w, {"processes": "8", "setsize": "13824m", "mapsize": "13824M", "pattern": "normal_ih",
                           "ratio": "80", "cold": "1", "initialize": "1", "eatmem": "47g"})
    assert (p["setsize"], p["mapsize"], p["eatmem"]) == (13824, 13824, 47 * 1024)
    assert w.command(p).startswith("numactl --membind=0 usemem 48128m")
    with pytest.raises(UserError):
        resolve_params(w, {"setsize": "13.5g"})
    # LKP tests/pmbench: mapsize defaults to the set size
    q = resolve_params(w, {"processes": "8", "setsize": "13824m", "pattern": "normal_ih", "initialize": "1"})
    assert "pmbench -s13824 -m13824 -pnormal_ih" in w.command(q)
