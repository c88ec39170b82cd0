"""The ``host`` preset: this machine, detected from /sys (native measurement).

Topology comes from ``/sys/devices/system/cpu`` (physical_package_id,
core_id, thread_siblings_list; cache/index*), NUMA nodes from
``/sys/devices/system/node`` (cpulist, meminfo, distance), the clock from
cpufreq or ``/proc/cpuinfo``. Whatever is missing (containers often hide
parts of /sys) falls back to one socket / one node and defaults, each marked
``estimate`` in ``Machine.sources``. Latencies, bandwidths and the cost model
cannot be read from /sys: they are estimates until ``mmsim calibrate``
writes ``$XDG_CONFIG_HOME/mmsim/host.yaml``, which then replaces detection.

The Machine model needs identical sockets numbered 0..n-1 and the Linux
Intel CPU numbering (SMT siblings ``ncores`` apart). A host numbered
differently (siblings adjacent, sparse package or node ids, SNC, CPU-less
memory nodes) becomes an equivalent Machine with the same counts; model CPU
``c`` is host CPU ``model_to_host_cpus()[c]``.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mmsim.machine import yamlio
from mmsim.machine.model import (
    ANON_FOLIO_SOURCE,
    COPY_MLP_SOURCE,
    ISSUE_SOURCE,
    SMT_SOURCE,
    WAKE_IPI_SOURCE,
    CacheLevel,
    CostModel,
    Machine,
    MemoryType,
    NumaNode,
    Socket,
)

NATIVE = "native measurement: "
EST = "estimate: "
# Defaults where /sys says nothing: a generic recent x86 server core (estimates).
DEFAULT_GHZ = 2.0  # estimate: typical server base clock
DEFAULT_LATENCY_NS = 90.0  # estimate: local DRAM of recent 2-socket Xeons (81-96 ns, see presets.py)
DEFAULT_READ_GBS = 50.0  # estimate: sustained read of a 4-6 channel DDR4 socket
DEFAULT_WRITE_GBS = 33.0  # estimate: about two thirds of the read bandwidth
DEFAULT_CACHES = {  # estimate: Skylake-class sizes/ways; latency in cycles
    "L1d": (48, 12, 5),
    "L2": (1280, 20, 14),
    "L3": (1536, 12, 55),  # per core; multiplied by the cores sharing it
}
LATENCY_CYCLES = {"L1d": 5, "L2": 14, "L3": 55}  # estimate: /sys has no latencies


def config_path() -> Path:
    """Where ``mmsim calibrate`` stores the calibrated host: $XDG_CONFIG_HOME/mmsim/host.yaml."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mmsim" / "host.yaml"


def host_machine() -> Machine:
    """The calibrated host file if it exists, else :func:`detect_host`."""
    path = config_path()
    if path.is_file():
        return yamlio.load_machine(path)
    return detect_host()


# -- reading /sys ----------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    s = _read(path)
    try:
        return int(s) if s is not None else None
    except ValueError:
        return None


def parse_cpulist(s: str | None) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; '' or None -> []."""
    out: list[int] = []
    for part in (s or "").replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            continue
    return out


def _parse_size_kib(s: str | None) -> int | None:
    """sysfs cache size ('48K', '2048K', '32M', or plain bytes) in KiB."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", s or "")
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2)
    return n // 1024 if not unit else n * {"K": 1, "M": 1024, "G": 1024 * 1024}[unit]


@dataclass
class _Cpu:
    id: int
    package: int
    core: int
    siblings: tuple[int, ...]


def _cpus(sysdir: Path) -> list[_Cpu]:
    online = parse_cpulist(_read(sysdir / "online"))
    if not online:
        online = sorted(int(p.name[3:]) for p in sysdir.glob("cpu[0-9]*") if p.name[3:].isdigit())
    if not online:
        online = list(range(os.cpu_count() or 1))
    cpus = []
    for c in online:
        topo = sysdir / f"cpu{c}" / "topology"
        pkg = _read_int(topo / "physical_package_id")
        core = _read_int(topo / "core_id")
        sib = parse_cpulist(_read(topo / "thread_siblings_list") or _read(topo / "core_cpus_list"))
        cpus.append(_Cpu(c, pkg if pkg is not None and pkg >= 0 else 0, core if core is not None else c,
                         tuple(sib) or (c,)))
    return cpus


def _caches(sysdir: Path, cpu: int, ncpus: int, cores_per_socket: int, threads: int,
            ghz: float, sources: dict[str, str]) -> tuple[CacheLevel, ...]:
    found: dict[str, CacheLevel] = {}
    for idx in sorted((sysdir / f"cpu{cpu}" / "cache").glob("index*")):
        level, kind = _read_int(idx / "level"), _read(idx / "type")
        name = {(1, "Data"): "L1d", (2, "Unified"): "L2", (3, "Unified"): "L3"}.get((level or 0, kind or ""))
        size = _parse_size_kib(_read(idx / "size"))
        if name is None or not size:
            continue
        ways = _read_int(idx / "ways_of_associativity") or 0
        line = _read_int(idx / "coherency_line_size") or 64
        shared = len(parse_cpulist(_read(idx / "shared_cpu_list"))) or 1
        found[name] = CacheLevel(
            name, size, ways if ways > 0 else 16, line if line & (line - 1) == 0 else 64,
            min(shared, ncpus), round(LATENCY_CYCLES[name] / ghz, 2),
        )
        sources[f"caches.{name}"] = NATIVE + f"{idx} (latency {EST}{LATENCY_CYCLES[name]} cycles)"
    default_shared = {"L1d": threads, "L2": threads, "L3": cores_per_socket * threads}
    for name, (kib, ways, cycles) in DEFAULT_CACHES.items():
        if name not in found:
            size = kib * cores_per_socket if name == "L3" else kib
            found[name] = CacheLevel(name, size, ways, 64, default_shared[name], round(cycles / ghz, 2))
            sources[f"caches.{name}"] = EST + "not in /sys; Skylake-class default"
    return tuple(found[n] for n in ("L1d", "L2", "L3"))


def _freq_ghz(root: Path, sysdir: Path, sources: dict[str, str]) -> float:
    for f in ("base_frequency", "cpuinfo_max_freq"):
        khz = _read_int(sysdir / "cpu0" / "cpufreq" / f)
        if khz and khz > 0:
            sources["freq_ghz"] = NATIVE + f"cpufreq/{f}"
            return round(khz / 1e6, 3)
    info = _read(root / "proc" / "cpuinfo") or ""
    m = re.search(r"^model name\s*:.*@\s*([\d.]+)\s*GHz", info, re.M)
    if m:
        sources["freq_ghz"] = NATIVE + "/proc/cpuinfo model name"
        return float(m.group(1))
    m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", info, re.M)
    if m and float(m.group(1)) > 0:
        sources["freq_ghz"] = NATIVE + "/proc/cpuinfo cpu MHz"
        return round(float(m.group(1)) / 1000, 3)
    sources["freq_ghz"] = EST + "no cpufreq or /proc/cpuinfo; default"
    return DEFAULT_GHZ


def _model_name(root: Path) -> str:
    m = re.search(r"^model name\s*:\s*(.+)$", _read(root / "proc" / "cpuinfo") or "", re.M)
    return " ".join(m.group(1).split()) if m else "unknown CPU"


@dataclass
class _Node:
    sysid: int
    cpus: list[int]
    kib: int | None
    distance: list[int]


def _nodes(root: Path) -> list[_Node]:
    nodedir = root / "sys" / "devices" / "system" / "node"
    ids = sorted(int(p.name[4:]) for p in nodedir.glob("node[0-9]*") if p.name[4:].isdigit())
    out = []
    for n in ids:
        d = nodedir / f"node{n}"
        m = re.search(r"MemTotal:\s*(\d+)\s*kB", _read(d / "meminfo") or "")
        dist = [int(x) for x in (_read(d / "distance") or "").split() if x.isdigit()]
        out.append(_Node(n, parse_cpulist(_read(d / "cpulist")), int(m.group(1)) if m else None, dist))
    return out


# -- building the Machine ----------------------------------------------------------


def _layout(cpus: list[_Cpu]) -> tuple[list[int], int, int, list[list[int]]]:
    """Packages (sorted), cores per socket, threads per core, and model->host CPU order.

    The model order is Linux-Intel: thread t of core k of socket s is model CPU
    ``t * ncores + s * cores_per_socket + k``.
    """
    packages = sorted({c.package for c in cpus})
    threads = Counter(len(c.siblings) for c in cpus).most_common(1)[0][0]
    cores_per_socket = max(1, len(cpus) // (len(packages) * threads))
    per_pkg: list[list[list[int]]] = []  # [socket][core] -> host CPUs, sorted
    for p in packages:
        cores: dict[int, list[int]] = {}
        for c in cpus:
            if c.package == p:
                cores.setdefault(c.core, []).append(c.id)
        per_pkg.append([sorted(v) for _, v in sorted(cores.items())])
    return packages, cores_per_socket, threads, [core for pkg in per_pkg for core in pkg]


def model_to_host_cpus(root: Path | str = Path("/")) -> list[int]:
    """Host CPU id of each model CPU (-1 where a non-uniform host has no such CPU)."""
    cpus = _cpus(Path(root) / "sys" / "devices" / "system" / "cpu")
    packages, cps, threads, cores = _layout(cpus)
    order = []
    for t in range(threads):
        for k in range(len(packages) * cps):
            core = cores[k] if k < len(cores) else []
            order.append(core[t] if t < len(core) else -1)
    return order


def _distances(nodes: list[_Node], keep: list[int], sources: dict[str, str]) -> tuple[tuple[int, ...], ...]:
    n = len(keep)
    rows = []
    ok = True
    for i in keep:
        row = nodes[i].distance
        if len(row) != len(nodes):
            ok = False
            break
        rows.append([row[j] for j in keep])
    if ok:
        for i in range(n):
            for j in range(n):
                if (i == j and rows[i][j] != 10) or (i != j and rows[i][j] <= 10):
                    ok = False
    if not ok:
        sources["distances"] = EST + "node distance files missing or invalid; 20 between nodes"
        return tuple(tuple(10 if i == j else 20 for j in range(n)) for i in range(n))
    sources["distances"] = NATIVE + "/sys/devices/system/node/node*/distance"
    return tuple(tuple(r) for r in rows)


def detect_host(root: Path | str = Path("/")) -> Machine:
    """Detect this machine (``root`` lets tests point at a fake /sys tree)."""
    root = Path(root)
    sysdir = root / "sys" / "devices" / "system" / "cpu"
    sources: dict[str, str] = {}
    cpus = _cpus(sysdir)
    packages, cps, threads, _ = _layout(cpus)
    sources["sockets"] = NATIVE + "/sys/devices/system/cpu/cpu*/topology"
    ghz = _freq_ghz(root, sysdir, sources)
    caches = _caches(sysdir, cpus[0].id, len(packages) * cps * threads, cps, threads, ghz, sources)

    pkg_of = {c.id: packages.index(c.package) for c in cpus}
    sysnodes = _nodes(root)
    # A socket's node is the first node holding one of its CPUs. Further nodes
    # with CPUs of an already mapped socket (sub-NUMA clustering) fold their
    # memory into that node; CPU-less memory nodes are kept as their own node.
    socket_node: dict[int, int] = {}
    keep: list[int] = []  # indices into sysnodes, in model node order
    folded: dict[int, int] = {}  # model node -> KiB folded into it
    for i, n in enumerate(sysnodes):
        socks = sorted({pkg_of[c] for c in n.cpus if c in pkg_of})
        new = [s for s in socks if s not in socket_node]
        if new or (not n.cpus and n.kib):
            for s in new:
                socket_node[s] = len(keep)
            keep.append(i)
        elif socks:
            nid = socket_node[socks[0]]
            folded[nid] = folded.get(nid, 0) + (n.kib or 0)
    nsock = len(packages)
    nodes: tuple[NumaNode, ...]
    distances: tuple[tuple[int, ...], ...]
    if not keep or len(socket_node) < nsock:
        nodes, distances = _single_node(root, sources), ((10,),)
        socket_node = {s: 0 for s in range(nsock)}
    else:
        nodes = _node_parts(sysnodes, keep, socket_node, folded, sources)
        distances = _distances(sysnodes, keep, sources)
    socket_parts = tuple(Socket(s, cps, threads, socket_node[s]) for s in range(nsock))
    sources["nodes.latency_ns"] = EST + f"{DEFAULT_LATENCY_NS} ns until mmsim calibrate"
    sources["nodes.bandwidth"] = EST + f"{DEFAULT_READ_GBS}/{DEFAULT_WRITE_GBS} GB/s until mmsim calibrate"
    ncpu = nsock * cps * threads
    desc = f"this machine: {_model_name(root)}, {ncpu} CPUs in {nsock} socket(s), detected from /sys"
    return Machine(
        name="host",
        description=desc,
        freq_ghz=ghz,
        sockets=socket_parts,
        caches=caches,
        nodes=nodes,
        distances=distances,
        cost=_host_cost(ghz),
        sources=sources,
    )


def _single_node(root: Path, sources: dict[str, str]) -> tuple[NumaNode, ...]:
    m = re.search(r"^MemTotal:\s*(\d+)\s*kB", _read(root / "proc" / "meminfo") or "", re.M)
    if m:
        gib, src = int(m.group(1)) / 2**20, NATIVE + "/proc/meminfo MemTotal (one node)"
    else:
        gib, src = 1.0, EST + "no meminfo; 1 GiB"
    sources["nodes.memory_gib"] = src
    return (NumaNode(0, round(gib, 3), MemoryType.DRAM, DEFAULT_LATENCY_NS, DEFAULT_READ_GBS,
                     DEFAULT_WRITE_GBS, 0),)


def _node_parts(sysnodes: list[_Node], keep: list[int], socket_node: dict[int, int],
                folded: dict[int, int], sources: dict[str, str]) -> tuple[NumaNode, ...]:
    out = []
    for new_id, i in enumerate(keep):
        n = sysnodes[i]
        owner = [s for s, nid in socket_node.items() if nid == new_id]
        if not owner:  # CPU-less node: owned by the socket of the nearest node with CPUs
            row = n.distance if len(n.distance) == len(sysnodes) else [0] * len(sysnodes)
            near = min((j for j in keep if sysnodes[j].cpus), key=lambda j: row[j])
            owner = [s for s, nid in socket_node.items() if nid == keep.index(near)]
        kib = (n.kib or 0) + folded.get(new_id, 0)
        gib = kib / 2**20 if kib else 1.0
        out.append(NumaNode(new_id, round(gib, 3), MemoryType.DRAM, DEFAULT_LATENCY_NS, DEFAULT_READ_GBS,
                            DEFAULT_WRITE_GBS, min(owner)))
    sources["nodes.memory_gib"] = NATIVE + "/sys/devices/system/node/node*/meminfo (renumbered 0..n-1)"
    return tuple(out)


def _host_cost(ghz: float) -> CostModel:
    """Estimates for an uncalibrated host, from the same rules as the presets."""
    from mmsim.machine import presets as p  # local import: presets imports this module

    l2 = round(LATENCY_CYCLES["L2"] / ghz, 2)
    l3 = round(LATENCY_CYCLES["L3"] / ghz, 2)
    return p.rule_cost(
        ghz, l2, socket_ns=2 * l3, hop_ns=50.0, local_ns=DEFAULT_LATENCY_NS, idle_exit_us=10,
        sources={k: "uncalibrated host; " + v for k, v in {
            "line_xfer_smt_ns": p.RULE_SMT, "line_xfer_socket_ns": p.RULE_SOCKET,
            "line_xfer_remote_ns": p.RULE_REMOTE + " (50 ns hop)", "core_clear_gbs": p.RULE_CLEAR,
            "ctx_switch_ns": p.RULE_CTX, "wakeup_ns": p.RULE_WAKE + " (10 us C1E)",
            "page_fault_ns": p.RULE_FAULT, "smt_thread_speed": "estimate: " + SMT_SOURCE,
            "line_hit_socket_ns": "estimate: no clean-line figure, equal to line_xfer_socket_ns",
            "line_hit_remote_ns": "estimate: no clean-line figure, equal to line_xfer_remote_ns",
            "issue_width": "estimate: " + ISSUE_SOURCE + "; mmsim calibrate measures it",
            "anon_folio_ns": "estimate: " + ANON_FOLIO_SOURCE,
            "copy_mlp": "estimate: " + COPY_MLP_SOURCE + "; mmsim calibrate measures it",
            "wake_ipi_ns": WAKE_IPI_SOURCE + "; mmsim calibrate measures it",
        }.items()},
    )
