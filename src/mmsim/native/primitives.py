"""``mmsim validate --suite primitives``: level 0 of the validation pyramid.

Each row is one machine primitive, simulated through the model's own code
paths and set against a reference measurement of the same quantity:

* ``chase.<level>``: latency of one dependent load in a random chain over a
  working set on that level's plateau (half of L1d/L2, a quarter of the LLC,
  2 x the LLC in the model and 8 x natively for DRAM). Private levels answer by capacity
  (:class:`CacheLevel`); beyond them the chain runs through the LLC model
  (:class:`mmsim.machine.llc.CacheModel`: a fill, then a second pass whose
  sub-pages hit or miss by reuse distance) and misses cost
  :meth:`Machine.mem_latency_ns`.
* ``dram.remote``: the same DRAM chase from a CPU on the next socket.
* ``c2c.<kind>``: a cache line bounced between two CPUs with locked RMWs
  through :class:`mmsim.locks.base.CacheLine` (what spinlocks and rwsems
  use), time per hand-off; kinds smt (SMT siblings), socket, remote.
* ``bw.<one_core|all_cpus>``: a 1 GiB write stream through
  :class:`mmsim.machine.bandwidth.MemoryBandwidth` from one CPU, and its
  per-stream share with one stream per CPU, summed (host only: no published
  per-preset stream figure was found). The stream's per-core limit is
  ``core_clear_gbs``, the rate of the kernel's page clears, so the native
  reference is the host kernel's own ``clear_page`` variant run 4 KiB at a
  time over a populated 1 GiB (:func:`mmsim.native.microbench.clear_page_gbs`;
  docs/validation.md, session 14).

References: published measurements (``reference_kind`` "published"), or,
where none was found, the preset's own labelled estimate ("estimate": the
row then checks only that the code path reproduces the primitive), or a
fresh native run of the calibrate microbenchmarks ("native") for the host.
``error_pct`` = 100 x (simulated - reference) / reference; ``ok`` = within
the row kind's tolerance (:data:`TOLERANCE_PCT`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mmsim.machine.bandwidth import MemoryBandwidth
from mmsim.machine.hierarchy import CacheHierarchy
from mmsim.machine.llc import SUBPAGE
from mmsim.machine.model import Machine
from mmsim.metrics.counters import Counters
from mmsim.progress import ProgressHook, Steps

TOLERANCE_PCT = {"latency": 15.0, "c2c": 15.0, "bandwidth": 20.0}
ROUNDS = 1000
STREAM_BYTES = 1 << 30
CLEAR_INSN = {"erms": "rep stosb", "rep": "rep stosq", "orig": "8 movq per line"}  # native/mb.c clear

# Published references per preset: quantity -> (value, source). Quantities use the preset's
# base clock where the source gives cycles.
MOLKA = "Molka et al., ICPP 2015 (2 x Xeon E5-2680 v3)"
PUBLISHED: dict[str, dict[str, tuple[float, str]]] = {
    "xeon-e5-2699v3-2s": {
        "chase.L1d": (4 / 2.3, f"{MOLKA}: L1 4 cycles"),
        "chase.L2": (4.8, f"{MOLKA}: L2 4.8 ns"),
        "chase.L3": (21.0, f"{MOLKA}: L3 ~21 ns"),
        "chase.DRAM": (96.0, f"{MOLKA}: local DRAM ~96 ns"),
        "dram.remote": (146.0, f"{MOLKA}: remote DRAM ~146 ns"),
        "c2c.socket": (41.3, "McCalpin (Intel forum): MLC L2-L2 modified intervention 40.3-42.3 ns, "
                       "Xeon E5-2660 v4 (Broadwell-EP, next generation)"),
    },
    "westmere-ex-4s": {
        "chase.DRAM": (135.0, "Intel MLC blog on 4 x E7-4800: local 135 ns"),
        "dram.remote": (197.0, "Intel MLC blog on 4 x E7-4800: remote 194-202 ns"),
        "c2c.socket": (109 / 2.13, "SOSP'13 Table 2 (second-hand), 8 x E7-8867L (Westmere-EX, same die): "
                       "modified line, same die 109 cycles at 2.13 GHz"),
        "c2c.remote": (289 / 2.13, "SOSP'13 Table 2 (second-hand), 8 x E7-8867L: one hop 289 cycles at 2.13 GHz "
                       "(8 sockets: the snoop waits for 2-hop responses, so an upper figure for 4 sockets)"),
        "chase.L2": (10 / 2.4, "Levinthal 2009: L2 10 cycles"),
    },
    "cascadelake-optane-2s": {
        "chase.DRAM": (80.8, "Intel MLC, 2 x Gold 6240 (VscDocumentation cascadelake_mlc.txt): local 80.8 ns"),
        "dram.remote": (140.4, "Intel MLC, 2 x Gold 6240: remote 140.4 ns"),
        "c2c.socket": (48.0, "nviennot/core-to-core-latency: Gold 6242 (Cascade Lake) same socket 48 ns"),
        "c2c.remote": (136.0, "nviennot/core-to-core-latency: Gold 6242 cross socket 136 ns"),
    },
    "icelake-6338-2s": {
        "chase.DRAM": (89.2, "Intel MLC 3.10, 2 x Platinum 8360Y (VscDocumentation icelake_mlc.txt): local 89.2 ns"),
        "dram.remote": (142.7, "Intel MLC 3.10, 2 x Platinum 8360Y: remote 142.7 ns"),
        "c2c.socket": (51.0, "nviennot/core-to-core-latency: Platinum 8375C (Ice Lake-SP) 51 ns"),
        "c2c.remote": (108.0, "nviennot/core-to-core-latency: Platinum 8375C cross socket 108 ns"),
        "c2c.smt": (8.1, "nviennot/core-to-core-latency: Platinum 8375C SMT siblings 8.1 ns"),
    },
    # issue 22: constants from other machines of the same die family (see machine/presets_mmap.py)
    "skylake-8170-2s": {
        "chase.DRAM": (90.2, "Intel MLC 3.10, 2 x Gold 6140 (Skylake-SP; VscDocumentation skylake_mlc.txt): 90.2 ns"),
        "dram.remote": (144.3, "Intel MLC 3.10, 2 x Gold 6140: remote 144.3 ns"),
        # no Skylake-SP CAS ping-pong figure found (MLC's HITM is another quantity): c2c rows are estimates
    },
    "cooperlake-8380h-4s": {
        "chase.DRAM": (80.8, "Intel MLC, 2 x Gold 6240 (Cascade Lake, VscDocumentation cascadelake_mlc.txt): 80.8 ns"),
        "dram.remote": (140.4, "Intel MLC, 2 x Gold 6240 (Cascade Lake): remote 140.4 ns"),
        "c2c.socket": (48.0, "nviennot/core-to-core-latency: Gold 6242 (Cascade Lake) same socket 48 ns"),
        "c2c.remote": (136.0, "nviennot/core-to-core-latency: Gold 6242 cross socket 136 ns"),
    },
}


def simulated_chase_ns(m: Machine, nbytes: int, cpu: int = 0, node: int | None = None) -> float:
    """Mean latency of a dependent load over ``nbytes`` through the model's cache and memory code:
    the L1d by capacity (the hierarchy starts at the L2), then a first pass that brings the chain in
    and a second, unstreamed one whose sub-pages are found in the L2, the LLC or memory
    (:class:`mmsim.machine.hierarchy.CacheHierarchy`), each level at its latency."""
    node = m.cpu_node(0) if node is None else node
    l1 = m.caches[0]
    if nbytes <= l1.capacity_kib * 1024:
        return float(l1.latency_ns)
    cm = CacheHierarchy(m, Counters(m.ncpus))
    n = max(1, nbytes // SUBPAGE)
    order = np.arange(n)
    t_mem = m.mem_latency_ns(cpu, node)
    cm.fill(cpu, "chase", n, order, 0, 0)  # first pass: the chain is brought in
    cm.found = [0.0, 0.0, 0.0]
    cm.access(cpu, "chase", n, order, 0.0, 1.0, 1, streamed=False)  # second pass
    f2, f3, fm = cm.found
    return (f2 * m.cache("L2").latency_ns + f3 * m.cache("L3").latency_ns + fm * t_mem) / n


def simulated_c2c_ns(m: Machine, a: int, b: int) -> float:
    """Time per hand-off of a line bounced between CPUs ``a`` and ``b`` with locked RMWs."""
    from mmsim.locks.base import CacheLine

    line = CacheLine(m, owner=a)
    now = 0
    for i in range(ROUNDS):
        now += line.rmw(b if i % 2 == 0 else a, now)
    return now / ROUNDS


def simulated_bw_gbs(m: Machine, streams: int) -> float:
    """GB/s of ``streams`` concurrent 1 GiB write streams on node 0, summed."""
    bw = MemoryBandwidth(m)
    for _ in range(streams):
        bw.write_ns(0, STREAM_BYTES, m.cost.core_clear_gbs, 0)
    return sum(STREAM_BYTES / e for e in bw.ends(0))  # all started together: their shared ends


def llc_chase_bytes(m: Machine) -> int:
    """The LLC's plateau working set: a quarter of its capacity C (other cores' lines share it), but never
    inside the L2 (a cyclic chase over the L2's size or less hits there) nor past C: ``min(C, max(2 x L2,
    C / 4))``. C is the capacity the cores get (:attr:`CacheLevel.capacity_kib`: a guest's measured share,
    docs/native.md session 31)."""
    return llc_plateau_bytes(m.cache("L2").capacity_kib * 1024, m.caches[-1].capacity_kib * 1024)


def llc_plateau_bytes(l2: int, c: int) -> int:
    """:func:`llc_chase_bytes`' rule for an L2 of ``l2`` bytes and an LLC capacity of ``c`` bytes."""
    return min(c, max(2 * l2, c // 4))


def chase_sizes(m: Machine, dram_factor: int = 8) -> dict[str, int]:
    """Plateau working sets: half of each private level, the LLC's :func:`llc_chase_bytes`, and
    ``dram_factor`` x the LLC's reported size (at least 256 MiB) for DRAM. The model's LLC is exact LRU, so
    the simulated chase needs only 2x; a real LLC (other cores' lines, imperfect replacement) needs more."""
    sizes = {c.name: c.capacity_kib * 1024 // 2 for c in m.caches}
    sizes[m.caches[-1].name] = llc_chase_bytes(m)
    sizes["DRAM"] = max(256 << 20, dram_factor * m.caches[-1].size_kib * 1024)
    return sizes


def _pairs(m: Machine) -> dict[str, tuple[int, int]]:
    out = {}
    if m.sockets[0].threads_per_core > 1:
        out["smt"] = (0, m.ncores)
    if m.sockets[0].cores > 1:
        out["socket"] = (0, 1)
    if len(m.sockets) > 1:
        out["remote"] = (0, m.sockets[0].cores)
    return out


def simulate(m: Machine) -> dict[str, float]:
    """Every primitive this machine has, simulated: quantity -> value (ns or GB/s)."""
    sizes = chase_sizes(m, dram_factor=2)
    out = {f"chase.{k}": simulated_chase_ns(m, v) for k, v in sizes.items()}
    if len(m.sockets) > 1:
        far = m.sockets[0].cores  # first CPU of socket 1
        out["dram.remote"] = simulated_chase_ns(m, sizes["DRAM"], cpu=far, node=m.cpu_node(0))
    for kind, (a, b) in _pairs(m).items():
        out[f"c2c.{kind}"] = simulated_c2c_ns(m, a, b)
    return out


def _kind(quantity: str) -> str:
    return "c2c" if quantity.startswith("c2c") else "bandwidth" if quantity.startswith("bw") else "latency"


def row(machine: str, quantity: str, sim: float, ref: float, source: str, ref_kind: str) -> dict[str, Any]:
    err = 100.0 * (sim - ref) / ref
    kind = _kind(quantity)
    return {
        "suite": "primitives", "machine": machine, "quantity": quantity, "simulated": round(sim, 2),
        "reference": round(ref, 2), "source": source, "reference_kind": ref_kind, "error_pct": round(err, 1),
        "tolerance_pct": TOLERANCE_PCT[kind], "ok": abs(err) <= TOLERANCE_PCT[kind],
    }


def _estimate_reference(m: Machine, quantity: str) -> tuple[float, str] | None:
    """The preset's own labelled estimate for a quantity no published figure covers."""
    c = m.cost
    if quantity.startswith("chase."):
        name = quantity.split(".")[1]
        if name == "DRAM":
            return m.nodes[m.cpu_node(0)].latency_ns, m.sources.get("nodes.latency_ns", "preset")
        return m.cache(name).latency_ns, m.sources.get("caches", "preset")
    if quantity == "dram.remote":
        n = m.nodes[m.cpu_node(0)]
        return float(n.remote_latency_ns or n.latency_ns), m.sources.get("distances", "preset")
    field = {"c2c.smt": "line_xfer_smt_ns", "c2c.socket": "line_xfer_socket_ns", "c2c.remote": "line_xfer_remote_ns"}
    f = field.get(quantity)
    return (float(getattr(c, f)), c.sources.get(f, "preset")) if f else None


def preset_rows(name: str, m: Machine) -> list[dict[str, Any]]:
    rows = []
    pub = PUBLISHED.get(name, {})
    for q, sim in simulate(m).items():
        if q in pub:
            ref, src = pub[q]
            rows.append(row(name, q, sim, ref, src, "published"))
        else:
            est = _estimate_reference(m, q)
            if est is not None:
                rows.append(row(name, q, sim, est[0], est[1], "estimate"))
    return rows


def host_rows(label: str, m: Machine, log: Any = lambda s: None) -> list[dict[str, Any]]:
    """The calibrated host's model against a fresh native run of the calibrate microbenchmarks."""
    from mmsim.machine.host import model_to_host_cpus
    from mmsim.native import microbench as mb

    rows: list[dict[str, Any]] = []
    sim = simulate(m)
    host = model_to_host_cpus()
    log("primitives: native pointer chase and cache-line hand-off")
    for q, nbytes in ((f"chase.{k}", v) for k, v in chase_sizes(m).items()):
        st = mb.chase_ns(nbytes)
        if st is not None and st.usable:
            rows.append(row(label, q, sim[q], st.median, f"native pointer chase over {nbytes >> 10} KiB "
                            f"(median of {st.samples}, IQR {100 * st.spread:.0f}%)", "native"))
    for kind, (a, b) in _pairs(m).items():
        ha, hb = (host[a], host[b]) if max(a, b) < len(host) else (-1, -1)
        st = mb.line_handoff_ns(ha, hb) if ha >= 0 and hb >= 0 else None
        if st is not None and st.usable:
            rows.append(row(label, f"c2c.{kind}", sim[f"c2c.{kind}"], st.median,
                            f"native CAS ping-pong CPU {ha} <-> {hb} (median of {st.samples})", "native"))
    log("primitives: one CPU running the kernel's clear_page over 1 GiB")
    fill = mb.bandwidth_gbs()["write"]
    clear = mb.clear_page_gbs(STREAM_BYTES)
    if clear is not None:
        gbs, st, variant = clear
        rows.append(row(label, "bw.one_core", simulated_bw_gbs(m, 1), gbs,
                        f"native clear_page ({CLEAR_INSN[variant]}, the host kernel's variant) 4 KiB at a time over "
                        f"a populated 1 GiB, one CPU, fastest of {st.samples} passes (median "
                        f"{4096 / st.median:.2f} GB/s); numpy fill {fill:.2f} GB/s for comparison", "native"))
    return rows


def validate_primitives(host_machine: str | None = None, log: Any = lambda s: None,
                        progress: ProgressHook | None = None) -> list[dict[str, Any]]:
    """Rows for the six seed presets, the two issue-22 robot machines, and ``host_machine`` (a calibrated
    YAML or 'host') if given; ``progress`` gets a start and an end event per preset and for the host's
    native measurements."""
    from mmsim.machine import get_machine
    from mmsim.machine.presets import PRESETS

    names = ["xeon-e5-2699v3-2s", "sgi-uv2000-512", "westmere-ex-4s", "cascadelake-optane-2s",
             "icelake-6338-2s", "xeon-phi-7295"]
    names += ["skylake-8170-2s", "cooperlake-8380h-4s"]  # issue 22 robot machines
    from mmsim.machine.host import config_path

    native = host_machine is not None and not (host_machine != "host" and host_machine in PRESETS) \
        and not (host_machine == "host" and not config_path().is_file())
    steps = Steps(progress, "validate primitives", len(names) + native)
    rows = []
    for n in names:
        with steps(n):
            rows += preset_rows(n, get_machine(n))

    if host_machine is not None and host_machine != "host" and host_machine in PRESETS:
        log(f"{host_machine} is a preset, not this host: no native rows for it")
    elif host_machine is not None and not native:
        log(f"host is not calibrated ({config_path()} missing): its primitives are estimates, host rows "
            "skipped; run mmsim calibrate, or pass --machine FILE.yaml")
    elif host_machine is not None:
        with steps(f"{host_machine}: native measurements"):
            rows += host_rows(host_machine, get_machine(host_machine), log)
    return rows
