"""The machine as composed, role-named, frozen parts (gem5 stdlib style).

Units are in field names. Every part validates itself in ``__post_init__``
and raises ``ValueError`` naming the field, so a bad preset or YAML file
fails before anything runs.

CPU numbering follows Linux on Intel servers: logical CPU ``c`` is core
``c % ncores`` (cores numbered socket by socket) and SMT thread
``c // ncores``; the SMT siblings of CPUs 0..ncores-1 are ncores..2*ncores-1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class MemoryType(StrEnum):
    DRAM = "DRAM"
    PMEM = "PMEM"


def _positive(obj: object, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{type(obj).__name__}.{n} must be a positive number, got {v!r}")


@dataclass(frozen=True)
class CacheLevel:
    """One cache level. ``shared_by`` = logical CPUs sharing one instance."""

    name: str  # "L1d", "L2", "L3"
    size_kib: int
    ways: int
    line_bytes: int
    shared_by: int
    latency_ns: float
    # The capacity the cores actually get, where it differs from what the kernel's cacheinfo reports
    # (``size_kib``, /sys): a guest's share of a host's L3, measured by ``mmsim calibrate`` (docs/native.md,
    # session 31). The cache model sizes the level by :attr:`capacity_kib`; the kernel's rules that read the
    # cache size (the PCP free_high batch) keep ``size_kib``. None: the same as ``size_kib``.
    effective_kib: int | None = None

    def __post_init__(self) -> None:
        if self.name not in ("L1d", "L2", "L3"):
            raise ValueError(f"CacheLevel.name must be one of L1d, L2, L3, got {self.name!r}")
        _positive(self, "size_kib", "ways", "line_bytes", "shared_by", "latency_ns")
        if self.effective_kib is not None:
            _positive(self, "effective_kib")
            if self.effective_kib > self.size_kib:
                raise ValueError(f"CacheLevel.effective_kib must be at most size_kib ({self.size_kib}), "
                                 f"got {self.effective_kib}")
        if self.line_bytes & (self.line_bytes - 1):
            raise ValueError(f"CacheLevel.line_bytes must be a power of two, got {self.line_bytes}")

    @property
    def capacity_kib(self) -> int:
        """The capacity the cache model uses: ``effective_kib`` where measured, else ``size_kib``."""
        return self.effective_kib if self.effective_kib is not None else self.size_kib


@dataclass(frozen=True)
class NumaNode:
    """A NUMA node: memory of one type, and the CPUs local to it (none for PMEM)."""

    id: int
    memory_gib: float
    mem_type: MemoryType
    latency_ns: float  # idle load-to-use latency from a local CPU
    read_bw_gbs: float  # sustainable read bandwidth of the node's memory (GB/s)
    write_bw_gbs: float  # sustainable write (store/clear) bandwidth (GB/s)
    socket: int  # socket whose memory controller owns it
    # Idle load-to-use latency from a CPU of the nearest other socket; farther sockets scale
    # by the SLIT ratio. None: derived from SLIT (latency_ns x distance ratio) by Machine.
    remote_latency_ns: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, int) or self.id < 0:
            raise ValueError(f"NumaNode.id must be an int >= 0, got {self.id!r}")
        _positive(self, "memory_gib", "latency_ns", "read_bw_gbs", "write_bw_gbs")
        if self.remote_latency_ns is not None:
            _positive(self, "remote_latency_ns")
        mem_type: object = self.mem_type  # YAML and callers may pass the plain string
        if not isinstance(mem_type, MemoryType):
            object.__setattr__(self, "mem_type", MemoryType(str(mem_type)))


@dataclass(frozen=True)
class Socket:
    """A processor package: ``cores`` cores of ``threads_per_core`` SMT threads."""

    id: int
    cores: int
    threads_per_core: int
    node: int  # the DRAM NUMA node of this socket

    def __post_init__(self) -> None:
        _positive(self, "cores", "threads_per_core")


# Marr et al., "Hyper-Threading Technology Architecture and Microarchitecture", Intel Technology
# Journal 6(1), 2002: two threads on one core give up to 30% more throughput than one, so each
# runs at about 1.3 / 2 = 0.65 of its solo speed when both are busy.
SMT_THREAD_SPEED = 0.65
SMT_SOURCE = "Marr et al., Intel Technology Journal 6(1) 2002: Hyper-Threading gives up to +30% per core"
# Fused uops a core issues (renames/allocates) per cycle: the bound of a front-end-bound user loop.
# 4 on Intel Core from Nehalem through Cascade Lake / Cooper Lake (Agner Fog, "The microarchitecture of
# Intel, AMD and VIA CPUs": "up to four instructions per clock" at rename).
ISSUE_WIDTH = 4.0
ISSUE_SOURCE = ("Agner Fog, The microarchitecture of Intel, AMD and VIA CPUs: 4 fused uops per clock at "
                "rename on Intel Core, Nehalem to Cascade Lake (the default)")

# Cache lines a core keeps in flight in a streaming copy whose source lines sit in another core's cache
# (the skb copies of AF_UNIX; net/skbuff.py copy_ns: lines x transfer latency / copy_mlp, Little's law).
# The default is the L1D fill buffers, 10 on Nehalem to Haswell (Intel Optimization Reference Manual);
# estimate for later cores and with L2 streamers helping: plausible 10-32. mmsim calibrate measures it.
COPY_MLP = 10.0
COPY_MLP_SOURCE = ("Intel Optimization Reference Manual: 10 L1D fill buffers, Nehalem to Haswell (the default); "
                   "estimate for later cores, plausible 10-32 with the L2 streamer")

# The waker's cost of the reschedule IPI that try_to_wake_up sends to an idle CPU (ttwu_queue_wakelist /
# smp_send_reschedule), beyond the wake path each caller charges (mm/costs.py: 800 cycles for
# sock_def_readable). On bare metal an x2APIC ICR write: estimate 0, plausible 0-300 ns. In a VM without IPI
# virtualisation the write is a VM exit: mmsim calibrate measures it (2.6-2.9 us on this 2-vCPU KVM guest).
WAKE_IPI_NS = 0.0
WAKE_IPI_SOURCE = ("estimate: bare metal, the x2APIC ICR write of the reschedule IPI, beyond the wake path the "
                   "callers charge: 0 (plausible 0-300 ns)")

ANON_FOLIO_SOURCE = ("not separated: page_fault_ns is a per-write-fault figure that includes the new folio's "
                     "work (charged 0); mmsim calibrate measures it as a write fault minus a read fault")


@dataclass(frozen=True)
class CostModel:
    """Per-machine costs of the primitive operations the kernel model charges.

    * ``line_xfer_*_ns``: moving a *modified* cache line from one CPU to another
      (a HITM snoop: the cost of a contended atomic / lock hand-off, measured as
      half a CAS ping-pong round trip) — between SMT siblings, within a socket,
      and to the nearest other socket; farther sockets scale by the SLIT
      distance ratio (SLIT is defined as relative latency).
    * ``line_hit_socket_ns`` / ``line_hit_remote_ns``: the same for a *clean*
      line another core holds (a HIT snoop: forwarded or read from the LLC
      without a write-back). ``None`` means no clean-line figure is known:
      the modified-line cost is used (and the source says so). SMT siblings
      share L1d/L2, so there is one SMT figure for both states.
    * ``core_clear_gbs``: bandwidth of one core clearing/copying pages
      (``clear_page_erms``), capped by the node's write bandwidth when shared.
    * ``ctx_switch_ns`` / ``wakeup_ns``: a context switch, and the latency from
      ``wake_up_process`` to the woken task running on an idle CPU.
    * ``page_fault_ns``: exception entry/exit plus handle_mm_fault bookkeeping
      excluding locks, allocation and clearing (those are charged separately).
    * ``anon_folio_ns``: the work a write fault does for its new anonymous 4 KiB folio that a
      zero-page read fault does not, beyond the allocator fast path, the clear and the
      ``do_anonymous_page`` path (mm/costs.py): ``alloc_anon_folio``'s ``mem_cgroup_charge``,
      ``post_alloc_hook`` / ``prep_new_page`` on the new page's struct page, ``folio_add_new_anon_rmap``,
      ``folio_add_lru_vma``, ``add_mm_counter`` (mm/memory.c v6.7). ``mmsim calibrate`` measures it as a
      write fault minus a read fault (and ``page_fault_ns`` on the read fault); ``None`` on the
      presets, whose ``page_fault_ns`` estimate is per write fault and includes it: charged 0.
    * ``smt_thread_speed``: speed of one SMT thread, relative to running alone
      on its core, while a sibling thread also runs (core-bound code only).
    * ``issue_width``: fused uops per cycle the core issues; a front-end-bound user loop
      (mm/user_loops.py) costs its uops / ``issue_width`` cycles per iteration when its data is cached.
    * ``copy_mlp``: lines in flight in a streaming copy from another core's cache (:data:`COPY_MLP`).
    * ``wake_ipi_ns``: the waker's cost of waking a task whose CPU is idle, beyond the wake path the caller
      charges: the reschedule IPI (:data:`WAKE_IPI_NS`; engine/cpu.py ``wake_up``).
    """

    line_xfer_smt_ns: float
    line_xfer_socket_ns: float
    line_xfer_remote_ns: float
    core_clear_gbs: float
    ctx_switch_ns: float
    wakeup_ns: float
    page_fault_ns: float
    smt_thread_speed: float = SMT_THREAD_SPEED
    line_hit_socket_ns: float | None = None
    line_hit_remote_ns: float | None = None
    issue_width: float = ISSUE_WIDTH
    anon_folio_ns: float | None = None
    copy_mlp: float = COPY_MLP
    wake_ipi_ns: float = WAKE_IPI_NS
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.issue_width == ISSUE_WIDTH and self.sources:  # a sourced machine: the default's source too
            self.sources.setdefault("issue_width", ISSUE_SOURCE)
        if self.copy_mlp == COPY_MLP and self.sources:
            self.sources.setdefault("copy_mlp", COPY_MLP_SOURCE)
        if self.wake_ipi_ns == WAKE_IPI_NS and self.sources:
            self.sources.setdefault("wake_ipi_ns", WAKE_IPI_SOURCE)
        if self.wake_ipi_ns < 0:
            raise ValueError(f"CostModel.wake_ipi_ns must be >= 0, got {self.wake_ipi_ns!r}")
        if self.anon_folio_ns is None and self.sources:
            self.sources.setdefault("anon_folio_ns", ANON_FOLIO_SOURCE)
        for hit, hitm in (("line_hit_socket_ns", "line_xfer_socket_ns"), ("line_hit_remote_ns", "line_xfer_remote_ns")):
            if getattr(self, hit) is None:
                object.__setattr__(self, hit, getattr(self, hitm))
                self.sources.setdefault(hit, f"no clean-line figure: assumed equal to {hitm}")
        _positive(
            self,
            "line_xfer_smt_ns",
            "line_xfer_socket_ns",
            "line_xfer_remote_ns",
            "core_clear_gbs",
            "ctx_switch_ns",
            "wakeup_ns",
            "page_fault_ns",
            "smt_thread_speed",
            "line_hit_socket_ns",
            "line_hit_remote_ns",
            "issue_width",
            "copy_mlp",
        )
        if self.anon_folio_ns is not None:
            _positive(self, "anon_folio_ns")
        if self.smt_thread_speed > 1:
            raise ValueError(f"CostModel.smt_thread_speed must be in (0, 1], got {self.smt_thread_speed!r}")


@dataclass(frozen=True)
class Machine:
    """A whole machine: sockets, caches, NUMA nodes, SLIT distances, costs."""

    name: str
    description: str
    freq_ghz: float
    sockets: tuple[Socket, ...]
    caches: tuple[CacheLevel, ...]
    nodes: tuple[NumaNode, ...]
    distances: tuple[tuple[int, ...], ...]  # SLIT, nodes x nodes, local = 10
    cost: CostModel
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Machine.name must be a non-empty string")
        _positive(self, "freq_ghz")
        object.__setattr__(self, "sockets", tuple(self.sockets))
        object.__setattr__(self, "caches", tuple(self.caches))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "distances", tuple(tuple(r) for r in self.distances))
        if not self.sockets:
            raise ValueError("Machine.sockets must list at least one socket")
        if not self.nodes:
            raise ValueError("Machine.nodes must list at least one NUMA node")
        for i, s in enumerate(self.sockets):
            if s.id != i:
                raise ValueError(f"Machine.sockets[{i}].id must be {i}, got {s.id}")
            if not 0 <= s.node < len(self.nodes):
                raise ValueError(
                    f"Machine.sockets[{i}].node {s.node} is not a node id (0..{len(self.nodes) - 1})"
                )
        for i, n in enumerate(self.nodes):
            if n.id != i:
                raise ValueError(f"Machine.nodes[{i}].id must be {i}, got {n.id}")
            if not 0 <= n.socket < len(self.sockets):
                raise ValueError(f"Machine.nodes[{i}].socket {n.socket} is not a socket id")
        tpc = {s.threads_per_core for s in self.sockets}
        cores = {s.cores for s in self.sockets}
        if len(tpc) != 1 or len(cores) != 1:
            raise ValueError("Machine.sockets must all have the same cores and threads_per_core")
        nn = len(self.nodes)
        if len(self.distances) != nn or any(len(r) != nn for r in self.distances):
            raise ValueError(f"Machine.distances must be a {nn}x{nn} matrix (one row per node)")
        for i in range(nn):
            if self.distances[i][i] != 10:
                raise ValueError(f"Machine.distances[{i}][{i}] must be 10 (SLIT local distance)")
            for j in range(nn):
                d = self.distances[i][j]
                if not isinstance(d, int) or d < 10 or (i != j and d == 10):
                    raise ValueError(
                        f"Machine.distances[{i}][{j}] must be an int > 10 off the diagonal, got {d!r}"
                    )
        names = [c.name for c in self.caches]
        if len(set(names)) != len(names) or "L3" not in names:
            raise ValueError("Machine.caches must have distinct levels and include L3")
        # Derived lookup tables (not fields: they are recomputed, never serialised).
        ncores_s = self.sockets[0].cores
        t = self.sockets[0].threads_per_core
        ncores = ncores_s * len(self.sockets)
        cpu_socket = tuple((c % ncores) // ncores_s for c in range(ncores * t))
        object.__setattr__(self, "_cpu_socket", cpu_socket)
        object.__setattr__(self, "_cpu_core", tuple(c % ncores for c in range(ncores * t)))
        object.__setattr__(self, "nodes", tuple(self._with_remote_latency(n) for n in self.nodes))
        object.__setattr__(self, "_socket_xfer", self._socket_xfer_table(modified=True))
        object.__setattr__(self, "_socket_hit", self._socket_xfer_table(modified=False))
        object.__setattr__(self, "_mem_lat", self._mem_latency_table())

    # -- topology ---------------------------------------------------------
    @property
    def ncpus(self) -> int:
        s = self.sockets[0]
        return len(self.sockets) * s.cores * s.threads_per_core

    @property
    def ncores(self) -> int:
        return len(self.sockets) * self.sockets[0].cores

    def cpu_socket(self, cpu: int) -> int:
        return self._cpu_socket[cpu]  # type: ignore[attr-defined,no-any-return]

    def smt_siblings(self, cpu: int) -> tuple[int, ...]:
        """The other logical CPUs of ``cpu``'s core."""
        n = self.ncores
        core = cpu % n
        return tuple(core + t * n for t in range(self.sockets[0].threads_per_core) if core + t * n != cpu)

    def cpu_node(self, cpu: int) -> int:
        return self.sockets[self.cpu_socket(cpu)].node

    def cache(self, name: str) -> CacheLevel:
        for c in self.caches:
            if c.name == name:
                return c
        raise KeyError(name)

    def node_cpus(self, node: int) -> list[int]:
        return [c for c in range(self.ncpus) if self.cpu_node(c) == node]

    # -- costs --------------------------------------------------------------
    def _remote_distance(self, node: int) -> int | None:
        """SLIT distance from the nearest other socket's CPUs to ``node`` (None: one socket)."""
        own = self.nodes[node].socket
        ds = [self.distances[s.node][node] for s in self.sockets if s.id != own]
        return min(ds) if ds else None

    def _with_remote_latency(self, n: NumaNode) -> NumaNode:
        if n.remote_latency_ns is not None:
            return n
        d = self._remote_distance(n.id)
        own = self.distances[self.sockets[n.socket].node][n.id]
        lat = n.latency_ns if d is None else n.latency_ns * d / own
        return NumaNode(n.id, n.memory_gib, n.mem_type, n.latency_ns, n.read_bw_gbs, n.write_bw_gbs, n.socket, lat)

    def _mem_latency_table(self) -> tuple[tuple[float, ...], ...]:
        """Idle latency [socket][node]: local from the owning socket, ``remote_latency_ns``
        from the nearest other socket, SLIT-scaled from there for farther sockets."""
        rows = []
        for s in self.sockets:
            row = []
            for n in self.nodes:
                if s.id == n.socket:
                    row.append(float(n.latency_ns))
                    continue
                dmin = self._remote_distance(n.id) or 10
                row.append(float(n.remote_latency_ns or n.latency_ns) * self.distances[s.node][n.id] / dmin)
            rows.append(tuple(row))
        return tuple(rows)

    def _socket_xfer_table(self, modified: bool) -> tuple[tuple[float, ...], ...]:
        c = self.cost
        local = c.line_xfer_socket_ns if modified else float(c.line_hit_socket_ns or 0)
        remote_ns = c.line_xfer_remote_ns if modified else float(c.line_hit_remote_ns or 0)
        ns = len(self.sockets)
        remote = [
            self.distances[self.sockets[a].node][self.sockets[b].node]
            for a in range(ns)
            for b in range(ns)
            if a != b
        ]
        dmin = min(remote) if remote else 20
        rows = []
        for a in range(ns):
            na = self.sockets[a].node
            row = []
            for b in range(ns):
                if a == b:
                    row.append(local)
                else:
                    d = self.distances[na][self.sockets[b].node]
                    row.append(remote_ns * d / dmin)
            rows.append(tuple(row))
        return tuple(rows)

    def xfer_ns(self, src_cpu: int, dst_cpu: int, modified: bool = True) -> float:
        """Cost of ``dst_cpu`` getting a cache line ``src_cpu``'s cache holds.

        ``modified``: the line is dirty there (a HITM snoop: a lock word, an
        atomic counter, data just written); else clean (a HIT snoop: data
        ``src_cpu`` only read). 0 on the same CPU; SMT siblings share L1d/L2.
        """
        if src_cpu == dst_cpu:
            return 0.0
        core = self._cpu_core  # type: ignore[attr-defined]
        if core[src_cpu] == core[dst_cpu]:
            return self.cost.line_xfer_smt_ns
        s = self._cpu_socket  # type: ignore[attr-defined]
        t = self._socket_xfer if modified else self._socket_hit  # type: ignore[attr-defined]
        return t[s[src_cpu]][s[dst_cpu]]  # type: ignore[no-any-return]

    def xfer_table(self, modified: bool = True) -> list[list[float]]:
        """:meth:`xfer_ns` for every (src, dst) pair: ``table[src][dst]`` (the lock model's
        :class:`~mmsim.locks.base.LineCosts`). Its elements are the cost model's own float objects,
        shared, not one per pair: the 512-CPU tables stay ~9 MB in a compiled core too."""
        n = self.ncpus
        return [[self.xfer_ns(a, b, modified) for b in range(n)] for a in range(n)]

    def mem_latency_ns(self, cpu: int, node: int) -> float:
        """Idle load-to-use latency from ``cpu`` to memory on ``node`` (no cache hit)."""
        return self._mem_lat[self._cpu_socket[cpu]][node]  # type: ignore[attr-defined,no-any-return]

    def llc_share_bytes(self) -> int:
        """Bytes of LLC per logical CPU sharing it (the PCP free_high rule uses this)."""
        l3 = self.cache("L3")
        return l3.size_kib * 1024 // l3.shared_by
