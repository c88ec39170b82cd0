"""What every lock needs: the engine, the machine's line-transfer costs, the
counters and the scheduler (for sleeping locks), and a cache line model.

A contended cache line is a serial resource: a locked read-modify-write
(``lock xadd``, ``lock cmpxchg``) has to own the line exclusively, so
concurrent atomics from different CPUs complete one after another, each
paying the transfer from the previous owner (NUMA distance matters). That is
the whole cost of an uncontended rwsem read acquisition on a shared
``mm_struct`` — the mechanism behind "a read lock is still an atomic on a
shared cache line".

Spinners (CPUs polling the line with plain loads: ticket-lock waiters, the
qspinlock pending waiter and MCS queue head) hold shared copies. Any write
invalidates all of them and each re-reads the line (the *re-read storm*).
The re-reads are served one after another, each from the line's current
holder: the first from the writer, whose copy is modified (a HITM transfer),
every later one from the previous reader (a clean HIT forward, MESIF's F
state). The order is the order the requests reach the line, which nothing in
the model fixes; following Boyd-Wickizer et al. ("Non-scalable locks are
dangerous", Linux Symposium 2012, §3: the waiter that gets the lock is at a
uniformly random place among the re-readers) each read is charged the
*expected* cost over that order, so the model stays deterministic:

* first read: mean over spinners ``w`` of ``HITM(writer, w)``, sent when the first of the ``n`` spinners has
  ended the PAUSE (``cpu_relax()``) the invalidation found it in: ``P / (n + 1)`` later on average, ``P``
  the machine's PAUSE (:func:`pause_ns`; session 35);
* each later read: mean over ordered spinner pairs ``(i, j)`` of ``HIT(i, j)``;
* the line is busy for the whole storm; a given reader is served, on
  average, after the first read and half of the others.

On a machine whose last-level cache is inclusive (``machine/cacheorg.py``: the Xeons before Skylake-SP)
the storm is served per socket (session 23, docs/locks.md): the L3 holds every line its cores hold, with
"core valid" bits, and "data is read directly from L3 if it is present in more than 1 core" (the F state is
not in the cores there; it is on Skylake-SP's non-inclusive L3). So only the first re-reader of each socket
sends a request across the interconnect: the line's path is the writer's HITM to the first reader, then one
clean forward per further socket with spinners (the mean socket-to-socket HIT over ordered pairs of distinct
spinner sockets). The socket's other cores read the line from its L3 off that path, one core after another:
"requests to the same address are not allowed to pass each other up in the Cbo" (Intel's uncore event
UNC_C_RxR_IRQ_RETRY.ADDR_CONFLICT, Sandy Bridge-EP to Broadwell-EP; docs/sources-l3-contended-reads.md),
each holding the slice for the preset's L3 latency (an estimate: the TOR holds an L3 hit "for a short
time"; plausible 0.5-1.5x, the retry turnaround unknown); SMT siblings share one request (their core's
L1). A random reader is served, on average, after the first read, half the forwards and half its socket's
other cores: ``first + (k - 1) / 2 x forward + sum_s c_s (m_s - 1) / 2n x L3`` (n spinners on k sockets,
c_s of them on m_s cores of socket s).

After a storm the line is Shared among the readers; the next write pays the
expected transfer from a random reader (the F-state holder) to the writer.
One exception: a write by the CPU whose write set off the storm, issued
before the storm's first re-read request has reached it (e.g. a ticket-lock
releaser's next ``xadd`` right after its unlock store), still finds the line
Modified in its own cache and costs nothing; that CPU then counts among the
storm's readers (it keeps a copy), and the storm goes on unchanged. The request
reaches the writer :data:`SNOOP_SHARE` of the way through the first re-read's
transfer (a round trip; session 25: until then the window ran to the data's
arrival at the reader, an upper bound).

A request in flight (session 11). A locked RMW on a line the CPU owns (Modified/Exclusive) completes
in its own cache. With no other request for the line in flight it costs nothing here (its own cycles are
part of the calling path's length, as before); while one is in flight its duration decides the order, so
it is charged :func:`local_rmw_ns`; the core "delays answering MESI share and RFO requests for the
line until after the store part of the locked operation" (the cache lock). A write by another CPU to a line
an exclusive owner holds is a request in flight for the transfer: the model orders it at the line when the
transfer ends (``start + transfer``). The request reaches the owner earlier, by the data's return trip:
at ``start + SNOOP_SHARE x transfer`` (session 25; it was the transfer's end until then, the upper bound of
the estimate). Until then the line is still the old owner's: its writes complete locally, one after
another, each pushing the snoop and the request's arrival by its overrun (cache lock); a write by the old
owner after the snoop queues for the line behind the request. The lock models order a remote RMW's effect
on the lock word at that arrival (:meth:`CacheLine.arrival`), so a releaser that comes straight back takes
the lock again ahead of a request whose snoop has not reached it yet.

All transfer costs come from the machine's ``xfer_table`` (:class:`LineCosts`, the one place that
asks the machine): HITM (``line_xfer_*_ns``) for modified lines, HIT (``line_hit_*_ns``)
for clean forwards, by distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from mmsim.engine.core import Engine
from mmsim.engine.cpu import Scheduler
from mmsim.machine.cacheorg import INCLUSIVE, cache_org
from mmsim.machine.model import Machine
from mmsim.metrics.counters import Counters, LockStat

SHARED = -1  # CacheLine.owner after a re-read storm: Shared among the last readers
_NO_MEMO: dict[int, float] = {}  # CacheLine._memo while not _big (never written: no memory per line)
_NO_COUNTS: dict[int, int] = {}  # CacheLine's per-socket counts until its first spinner (never written)
_NO_READERS: set[int] = set()  # CacheLine._rd until its first plain reader (never written)
# The share of a transfer's cost (a round trip: request out, data back) after which the request reaches the line's
# owner, which then loses it (docs/locks.md, session 25): estimate, one trip of two; plausible 1/3 .. 2/3.
SNOOP_SHARE = 0.5
SMALL = 4  # up to this many distinct spinner CPUs, CacheLine sums over them directly (else per socket)


# A locked RMW (lock xadd / cmpxchg / xchg) on a line the CPU already owns: "xchg() = 18 cycles (no segment
# prefix, LOCK semantics)", Christoph Lameter, commit 8270137a0d50 "cpuops: Use cmpxchg for xchg to avoid
# lock semantics" (v2.6.38; an Intel core of 2010, not named). Used for every preset, at its clock: an
# estimate for the later cores (plausible 17-25 cycles; LLVM's btver2 model, commit b1bdd97a2671, measures
# 16-17 cycles for Jaguar's lock cmpxchg / xchg).
LOCAL_RMW_CYCLES = 18.0
# This host (the AMD EPYC VM the native rows run on): ``lockbench owned-ticket`` (the unlock store + lock xadd
# loop on a line that stays in this CPU's cache), 7.90 ns per iteration, median of 100 samples on CPU 0 and on
# CPU 1 alike (session 11, 2026-12-02; ``owned-queued``, store + lock cmpxchg: 6.24 ns; session 10 noted
# 13.4 ns, by a method not kept). The xadd drains the store, so the iteration is charged to the RMW. A native
# measurement of this host only: a user's host is not this one.
HOST_LOCAL_RMW_NS = 7.9


def local_rmw_ns(machine: Machine) -> int:
    """ns of a locked RMW on a line ``machine``'s CPU owns: the host's measured loop on ``host``, else
    :data:`LOCAL_RMW_CYCLES` at the machine's clock (at least 1 ns: integer time)."""
    ns = HOST_LOCAL_RMW_NS if machine.name == "host" else LOCAL_RMW_CYCLES / machine.freq_ghz
    return max(1, round(ns))


def pause_ns(machine: Machine) -> float:
    """ns of one PAUSE (``cpu_relax()``) at ``machine``'s clock: the spin loops' load waits for the PAUSE it
    follows, so a write's invalidation is seen at the end of the PAUSE it finds a spinner in, uniform on
    [0, this] (docs/locks.md, session 35; ``pause_cycles`` and its source in :mod:`mmsim.machine.cacheorg`)."""
    return cache_org(machine.name).pause_cycles / machine.freq_ghz


class LineCosts:
    """The transfer costs of one machine in the shapes the lock code reads them.

    * ``hitm`` / ``hit``: CPU x CPU nested lists, for scalar look-ups (an MCS
      node hand-off, a reader's RMW);
    * ``sock``, ``core``, ``smt``, ``tm``, ``th``: the same costs factored the
      way :meth:`Machine.xfer_ns` computes them — 0 on the same CPU, ``smt``
      between SMT siblings, else a socket x socket table (``tm`` HITM, ``th``
      HIT) — so that a sum over a set of spinners is a sum over the sockets
      they occupy (:class:`CacheLine`), not over every CPU.

    * ``vecs``: for :class:`CacheLine`'s socket sums, the vector each one reads for a CPU on
      socket ``sc`` — indexed ``vecs[d][sc]``, ``d`` = 2 x direction (0 out: ``table[sc][s]``,
      1 in: ``table[s][sc]``) + (0 ``th``, 1 ``tm``) — and ``vec_id``, the same shape: one id per
      distinct vector (equal costs, equal id), so sums that multiply the same spinner counts by the
      same vector are made once (e.g. ``tm`` = ``th``, or a symmetric table's in and out).

    Built once per machine (:func:`line_costs`)."""

    __slots__ = ("hitm", "hit", "sock", "core", "smt", "tm", "th", "symmetric", "vecs", "vec_id", "l3_ns",
                 "by_socket")

    def __init__(self, machine: Machine) -> None:
        n = machine.ncpus
        # built by the (pure Python) machine model, whose elements are its few cost objects: a compiled core
        # (mmsim.corebuild) would box each element anew, ~65 MB for a 512-CPU machine's two tables
        self.hitm: list[list[float]] = machine.xfer_table(modified=True)
        self.hit: list[list[float]] = machine.xfer_table(modified=False)
        self.sock: tuple[int, ...] = tuple(machine._cpu_socket)  # type: ignore[attr-defined]
        self.core: tuple[int, ...] = tuple(machine._cpu_core)  # type: ignore[attr-defined]
        self.smt = float(machine.cost.line_xfer_smt_ns)
        self.tm: tuple[tuple[float, ...], ...] = machine._socket_xfer  # type: ignore[attr-defined]
        self.th: tuple[tuple[float, ...], ...] = machine._socket_hit  # type: ignore[attr-defined]
        ns = len(self.th)
        self.symmetric = all(self.th[a][b] == self.th[b][a] for a in range(ns) for b in range(ns))
        # A storm is served per socket when the LLC is inclusive and is the socket's own (module docstring):
        # then ``l3_ns`` is the L3 hit of a socket's later re-readers; 0.0 and ``by_socket`` False otherwise.
        self.l3_ns = 0.0
        if cache_org(machine.name).llc == INCLUSIVE:
            l3 = next((c for c in machine.caches if c.name == "L3"), None)
            if l3 is not None and l3.shared_by * ns == n:
                self.l3_ns = float(l3.latency_ns)
        self.by_socket = self.l3_ns > 0.0
        ids: dict[tuple[float, ...], int] = {}
        vecs: list[tuple[tuple[float, ...], ...]] = []
        for direction in (0, 1):
            for table in (self.th, self.tm):
                vecs.append(tuple(table[sc] if direction == 0 else tuple(table[s][sc] for s in range(ns))
                                  for sc in range(ns)))
        self.vecs: tuple[tuple[tuple[float, ...], ...], ...] = tuple(vecs)
        self.vec_id: tuple[tuple[int, ...], ...] = tuple(tuple(ids.setdefault(v, len(ids)) for v in vs)
                                                         for vs in vecs)
        # The factored form must give exactly what xfer_ns gives, pair by pair.
        for a in range(n):
            for b in range(n):
                if a == b:
                    want_m = want_h = 0.0
                elif self.core[a] == self.core[b]:
                    want_m = want_h = self.smt
                else:
                    want_m, want_h = self.tm[self.sock[a]][self.sock[b]], self.th[self.sock[a]][self.sock[b]]
                if want_m != self.hitm[a][b] or want_h != self.hit[a][b]:
                    raise ValueError(f"line costs of {machine.name} do not factor by core/socket at ({a}, {b})")


_COSTS: dict[int, tuple[Machine, LineCosts]] = {}


def line_costs(machine: Machine) -> LineCosts:
    """The machine's :class:`LineCosts` (cached; a few machines per process)."""
    hit = _COSTS.get(id(machine))
    if hit is not None and hit[0] is machine:
        return hit[1]
    if len(_COSTS) > 8:
        _COSTS.clear()
    lc = LineCosts(machine)
    _COSTS[id(machine)] = (machine, lc)
    return lc


@dataclass
class LockContext:
    """Shared by every lock of a run; owns the lock_stat table."""

    engine: Engine
    machine: Machine
    counters: Counters
    sched: Scheduler
    stats: dict[str, LockStat] = field(default_factory=dict)

    def stat(self, name: str, kind: str) -> LockStat:
        """The lock_stat entry of a lock *class* (all instances share it)."""
        s = self.stats.get(name)
        if s is None:
            s = self.stats[name] = LockStat(name=name, kind=kind, instances=0)
        s.instances += 1
        return s


# The fast mode's window (mmsim.metrics.sampling): while a window is open (``_win_gen`` > 0) a line saves its
# counters at its first write of that window and lists itself in ``_win_lines``, so that the window's end
# extrapolates the lines that moved from their values at its start without a pass over every line (a pass per
# window was ~5 % of a 72-thread arm's host time, session 33). Generations are never reused.
_win_gen = 0
_win_next = 0
_win_lines: list[CacheLine] = []


def window_open() -> int:
    """Start a window: returns its generation; the lines written from now on are listed under it."""
    global _win_gen, _win_next, _win_lines
    _win_next += 1
    _win_gen = _win_next
    _win_lines = []
    return _win_gen


def window_lines(gen: int) -> list[CacheLine]:
    """The lines written since :func:`window_open` returned ``gen`` (each once; their counters at the window's
    start in ``_v0``), and close the window. ``[]`` if another window has opened since."""
    global _win_gen, _win_lines
    if gen != _win_gen:
        return []
    lines = _win_lines
    _win_gen = 0
    _win_lines = []
    return lines


def window_close() -> None:
    """No window open (a new fast-forward controller; nothing is listed)."""
    global _win_gen, _win_lines
    _win_gen = 0
    _win_lines = []


class CacheLine:
    """One cache line that several CPUs write with atomics, and spinners read.

    ``rmw(cpu, now)`` returns the ns until ``cpu``'s locked RMW completes: it
    waits for the line to be free (``free_at``), then pays the transfer from
    the current holder; if CPUs are spinning on the line, the write sets off
    the re-read storm (module docstring) and the line stays busy until it is
    over. State is a few numbers and a per-CPU spinner count: millions of
    atomics cost no events. Several objects may share one line (false
    sharing), e.g. ``page_table_lock`` and ``mmap_sem.count`` in
    ``struct mm_struct``.
    """

    __slots__ = ("costs", "owner", "home", "free_at", "transfers", "nspin", "_cpu", "_big", "_core", "_sock",
                 "_pairs", "_log", "_nsnap", "_wcpu", "_first_at", "_wdone", "_wkept", "_memo", "local_ns",
                 "pause_ns", "_prev",
                 "_req", "_land", "_snoop", "remote", "_socc", "_spairs", "_corec", "_sockm", "_cm",
                 "writes", "wlocal", "qwrites", "qwait", "storms", "sspin", "sstall", "_rd", "_rdlast", "_wg", "_v0")

    def __init__(self, machine: Machine, owner: int = 0) -> None:
        self.costs = line_costs(machine)
        self.owner = owner
        self.home = owner
        self.free_at = 0
        self.transfers = 0
        # What the line's writes met (perf c2c's view of one line; reported with the locks on it,
        # LockStat.line_dict): writes that took the general path, writes that completed in the writer's
        # own window (a storm's writer, the old owner of a write in flight), writes that queued behind the
        # line (``free_at`` > now) and their total wait in ns, writes that set off a re-read storm and the
        # spinners they found, and those spinners' stall in ns: each one's copy is invalidated and its next
        # load waits for its re-read (docs/locks.md, session 27: the spin loop's retired instructions).
        # Counts only: nothing reads them during the run.
        self.writes = 0
        self.wlocal = 0
        self.qwrites = 0
        self.qwait = 0
        self.storms = 0
        self.sspin = 0
        self.sstall = 0.0
        self._wg = 0  # the fast-mode window generation of its counters' saved values ``_v0`` (window_open)
        self._v0: tuple[int | float, ...] = ()
        self.nspin = 0
        # Spinners per CPU, per core and per socket (occupied entries only). A sum over the
        # spinners is then a sum over the sockets they occupy plus a same-core correction
        # (LineCosts), O(sockets) in pure Python rather than a dot product over every CPU.
        self._cpu: dict[int, int] = {}
        self._big = False  # more than SMALL spinner CPUs at some point: the core/socket counts are kept
        self._core: dict[int, int] = {}
        self._sock: dict[int, int] = {}
        # While _big: the socket sums of _out / _in already made since _sock last changed, by the id
        # of the cost vector they read (LineCosts.vec_id). Host time only: the same products summed
        # in the same order (the dict's) give the same float, so a repeated sum is looked up.
        self._memo: dict[int, float] = _NO_MEMO  # a dict of its own from the switch to _big on
        self._pairs = 0.0  # sum of HIT(i, j) over ordered pairs of distinct spinners
        # While owner == SHARED: the (cpu, +1/-1) changes to the spinner set since the storm,
        # so the storm's readers are the current spinners minus these (no copy per storm).
        self._log: list[tuple[int, int]] | None = None
        self._nsnap = 0
        # The CPU whose write set off the storm under way, and when the storm's first re-read takes
        # the line from it: until then the line is still Modified in that CPU's cache.
        self._wcpu = -1
        self._first_at = 0
        self._wdone = 0  # when that write itself completes (its RFO)
        self._wkept = False  # the storm's writer already counted among its readers
        self.local_ns = local_rmw_ns(machine)  # a locked RMW on a line this CPU owns
        self.pause_ns = pause_ns(machine)  # a spinner sees a write after the PAUSE it is in (session 35)
        # A write in flight to a line an exclusive owner held: the old owner ``_prev`` keeps the line until
        # ``_snoop``, when the request of ``_req`` reaches it, and the write completes at ``_land`` (module
        # docstring); -1: none in flight.
        self._prev = -1
        self._req = -1
        self._land = 0
        self._snoop = 0
        self.remote = False  # the last write took the line from another CPU (a transfer)
        # Plain loads by CPUs that do not spin on the line (:meth:`read`) since its last write: they hold
        # shared copies that the next write invalidates; ``_rdlast`` is the last of them (the forwarder)
        self._rd: set[int] = _NO_READERS
        self._rdlast = -1
        # costs.by_socket: spinners per occupied socket, and the sum of HIT(a, b) over ordered pairs of
        # distinct occupied sockets (the storm's forwards); else unused (the per-CPU ``_pairs`` instead)
        # (dicts of their own from the first spinner on: most lines never have one)
        self._socc: dict[int, int] = _NO_COUNTS
        self._spairs = 0.0
        # ... and spinners per occupied core, occupied cores per socket (m_s), and sum_s c_s x (m_s - 1)
        self._corec: dict[int, int] = _NO_COUNTS
        self._sockm: dict[int, int] = _NO_COUNTS
        self._cm = 0

    # -- sums over the spinners ----------------------------------------------
    def _out(self, table: tuple[tuple[float, ...], ...], c: int) -> float:
        """Sum over the spinners ``j`` (with multiplicity) of the cost ``c -> j``
        (``table`` is the socket table: ``tm`` HITM or ``th`` HIT)."""
        co = self.costs
        if not self._big:  # few spinner CPUs: sum them directly
            r = (co.hitm if table is co.tm else co.hit)[c]
            t = 0.0
            for j, k in self._cpu.items():
                t += k * r[j]
            return t
        sc = co.sock[c]
        row = table[sc]
        t = self._sock_sum(co.vec_id[table is co.tm][sc], row)
        kc = self._core.get(co.core[c], 0)
        if kc:
            t += kc * (co.smt - row[sc]) - self._cpu.get(c, 0) * co.smt
        return t

    def _sock_sum(self, key: int, vec: Sequence[float]) -> float:
        """Sum over the spinners' sockets of count x ``vec[socket]``, kept in the memo under ``key`` (the
        id of ``vec``'s values) until the socket counts change: the same products in the same order."""
        memo = self._memo
        t = memo.get(key)
        if t is None:
            t = 0.0
            for s, k in self._sock.items():
                t += k * vec[s]
            memo[key] = t
        return t

    def _in(self, table: tuple[tuple[float, ...], ...], c: int) -> float:
        """Sum over the spinners ``j`` of the cost ``j -> c``."""
        co = self.costs
        if not self._big:
            m = co.hitm if table is co.tm else co.hit
            t = 0.0
            for j, k in self._cpu.items():
                t += k * m[j][c]
            return t
        sc = co.sock[c]
        d = 2 + (table is co.tm)
        t = self._sock_sum(co.vec_id[d][sc], co.vecs[d][sc])  # the column table[s][sc] by s
        kc = self._core.get(co.core[c], 0)
        if kc:
            t += kc * (co.smt - table[sc][sc]) - self._cpu.get(c, 0) * co.smt
        return t

    def _both(self, c: int) -> float:
        """Sum of HIT(c, j) + HIT(j, c) over the spinners: what ``c`` adds to the pair sum."""
        th = self.costs.th
        if self.costs.symmetric:
            return 2.0 * self._out(th, c)
        return self._out(th, c) + self._in(th, c)

    # -- spinners ------------------------------------------------------------
    def _sock_both(self, s: int) -> float:
        """Sum of HIT(s, o) + HIT(o, s) over the other occupied sockets ``o``."""
        th = self.costs.th
        row = th[s]
        t = 0.0
        for o in self._socc:
            if o != s:
                t += row[o] + th[o][s]
        return t

    def add_spinner(self, cpu: int) -> None:
        co = self.costs
        if co.by_socket:
            so = self._socc
            if so is _NO_COUNTS:
                so = self._socc = {}
                self._corec = {}
                self._sockm = {}
            s = co.sock[cpu]
            v = so.get(s, 0)
            if not v and so:
                self._spairs += self._sock_both(s)
            so[s] = v + 1
            cc = self._corec
            c = co.core[cpu]
            w = cc.get(c, 0)
            cc[c] = w + 1
            sm = self._sockm
            m = sm.get(s, 0)
            m2 = m if w else m + 1
            sm[s] = m2
            self._cm += (v + 1) * (m2 - 1) - v * (m - 1)
        elif self.nspin:
            self._pairs += self._both(cpu)
        d = self._cpu
        d[cpu] = d.get(cpu, 0) + 1
        if self._big:
            d = self._core
            k = co.core[cpu]
            d[k] = d.get(k, 0) + 1
            d = self._sock
            k = co.sock[cpu]
            d[k] = d.get(k, 0) + 1
            if self._memo:
                self._memo.clear()
        elif len(d) > SMALL:  # switch to the per-socket sums: build the core and socket counts
            self._big = True
            self._memo = {}
            for j, k in d.items():
                self._core[co.core[j]] = self._core.get(co.core[j], 0) + k
                self._sock[co.sock[j]] = self._sock.get(co.sock[j], 0) + k
        self.nspin += 1
        if self._log is not None:
            self._log.append((cpu, 1))

    def remove_spinner(self, cpu: int) -> None:
        d = self._cpu
        v = d.get(cpu, 0)
        if not v:
            raise RuntimeError(f"remove_spinner({cpu}) without add_spinner")
        if v > 1:
            d[cpu] = v - 1
        else:
            del d[cpu]
        if self._big:
            co = self.costs
            for d, k in ((self._core, co.core[cpu]), (self._sock, co.sock[cpu])):
                v = d[k] - 1
                if v:
                    d[k] = v
                else:
                    del d[k]
            if self._memo:
                self._memo.clear()
        self.nspin -= 1
        if self.costs.by_socket:
            co = self.costs
            so = self._socc
            s = co.sock[cpu]
            cc = self._corec
            c = co.core[cpu]
            w = cc[c] - 1
            if w:
                cc[c] = w
            else:
                del cc[c]
            sm = self._sockm
            m = sm[s]
            m2 = m if w else m - 1
            v = so[s] - 1
            self._cm += v * (m2 - 1) - (v + 1) * (m - 1)
            if v:
                so[s] = v
                sm[s] = m2
            else:
                del so[s]
                del sm[s]
                self._spairs = self._spairs - self._sock_both(s) if len(so) > 1 else 0.0
        elif self.nspin:
            self._pairs -= self._both(cpu)
        if not self.nspin:
            self._pairs = 0.0
            if self._big:
                self._big = False
                self._core.clear()
                self._sock.clear()
                self._memo = _NO_MEMO
        if self._log is not None:
            self._log.append((cpu, -1))

    def storm(self, writer: int) -> tuple[float, float, float]:
        """The re-read storm a write by ``writer`` sets off, expected ns: (the first re-read, the rest of
        the line's path after it, the time after the first re-read until a random spinner has read the
        line). (0, 0, 0) without spinners. :meth:`write` inlines the same arithmetic."""
        n = self.nspin
        if not n:
            return 0.0, 0.0, 0.0
        first = self._out(self.costs.tm, writer) / n + self.pause_ns / (n + 1)
        rest, mid = self._rest(n)
        return first, rest, mid

    def _rest(self, n: int) -> tuple[float, float]:
        """(the storm's path after its first re-read, a random reader's wait after the first re-read) with
        ``n`` spinners: per socket on an inclusive L3, else per CPU (module docstring)."""
        co = self.costs
        if co.by_socket:
            k = len(self._socc)
            rest = (k - 1) * (self._spairs / (k * (k - 1))) if k > 1 else 0.0
            return rest, rest / 2 + self._cm / (2 * n) * co.l3_ns
        rest = (n - 1) * (self._pairs / (n * (n - 1))) if n > 1 else 0.0
        return rest, rest / 2

    # -- plain loads -----------------------------------------------------------
    def read(self, cpu: int, now: int) -> int:
        """A plain load of the line by ``cpu``, which is not spinning on it (e.g. ``zone->flags``, which
        shares ``zone->lock``'s line from v6.5: docs/pcp-free-high.md, session 28): ns until the data
        arrives. Free if ``cpu`` owns the line or still holds a copy since the last write; else a transfer
        from the last reader (a clean forward) or from the owner (HITM while its copy is Modified), after
        any write queued on the line. ``cpu`` keeps a shared copy: the next write invalidates it
        (:meth:`write`). Not for spinners (:meth:`add_spinner`), whose re-reads are the storm's."""
        o = self.owner
        rd = self._rd
        if o == cpu or cpu in rd:
            return 0
        co = self.costs
        src = self._rdlast if rd else o
        if src < 0:  # Shared after a storm, no plain reader yet: a forward from one of the storm's readers
            cost = self.rfo_ns(cpu)
        else:
            cost = co.hit[src][cpu] if rd else co.hitm[src][cpu]
        if rd is _NO_READERS:
            rd = self._rd = set()
        rd.add(cpu)
        self._rdlast = cpu
        wait = self.free_at - now
        return int(cost) + (wait if wait > 0 else 0)

    def _invalidate(self, cpu: int) -> float:
        """The plain readers' copies end at a write by ``cpu``: the expected ns of getting the line exclusive
        past them, a transfer from the last reader (the forwarder; the upgrade's snoop approximated by a
        transfer, as ``mm/buddy.py`` does for the zone's free_area lines), or from another holder if ``cpu``
        read last; 0 if ``cpu`` is the only copy. The line is no longer Modified in a writer's cache, so the
        writer's own windows (a storm's writer, an old owner with a request in flight) end here."""
        rd = self._rd
        f = self._rdlast
        if f == cpu:
            others = [j for j in rd if j != cpu]
            o = self.owner
            f = min(others) if others else (o if o >= 0 and o != cpu else -1)
        self._rd = _NO_READERS
        self._rdlast = -1
        self._wcpu = -1
        self._prev = -1
        return self.costs.hit[f][cpu] if f >= 0 else 0.0

    # -- writes --------------------------------------------------------------
    def rfo_ns(self, cpu: int) -> float:
        """Expected ns to get the line exclusive at ``cpu`` (read-for-ownership)."""
        o = self.owner
        if o == cpu:
            return 0.0
        if o == SHARED and self._log is not None:
            # mean over the storm's readers j of HIT(j -> cpu): today's spinners, less the changes since
            t = self._in(self.costs.th, cpu)
            hit = self.costs.hit
            for j, d in self._log:
                t -= d * hit[j][cpu]
            return t / self._nsnap
        return self.costs.hitm[o][cpu]

    def arrival(self, cpu: int) -> int:
        """When the write in flight by ``cpu`` reaches the line (pushed by the old owner's local writes
        meanwhile); -1 if none of ``cpu``'s is in flight."""
        return self._land if self._req == cpu else -1

    def write(self, cpu: int, now: int, rmw: bool = False) -> tuple[int, float, float]:
        """A write by ``cpu`` at ``now`` (``rmw``: a locked RMW, which costs :attr:`local_ns` on a line the
        CPU owns while another request for it is in flight; a plain store retires from the store buffer):
        queue for the line, take it, set off
        the storm. Returns (ns until the write completes, the storm's first re-read, a random spinner's
        wait after it: :meth:`storm`); the line is busy until the storm ends.

        The hot path of every lock: :meth:`rfo_ns` and :meth:`storm` are
        inlined here (same arithmetic)."""
        if _win_gen and self._wg != _win_gen:  # the first write of a fast-mode window: save the counters
            self._wg = _win_gen
            self._v0 = (self.writes, self.wlocal, self.qwrites, self.qwait, self.storms, self.sspin,
                        self.transfers, self.sstall)
            _win_lines.append(self)
        inv = 0.0
        if self._rd:  # plain readers hold copies (:meth:`read`): this write invalidates them
            inv = self._invalidate(cpu)
        if cpu == self._wcpu and now < self._first_at:
            # The writer of the storm under way writes again before the first re-read has reached it:
            # the line is still Modified in its cache, so the write hits there (0 ns), and the storm's
            # readers, still on their way, will see this value too (e.g. a ticket-lock releaser's next
            # xadd right after its unlock store). The storm goes on as it was, and the writer keeps a
            # copy among the storm's readers (the next write has to take the line from them).
            if self._log is not None and not self._wkept:  # one copy, however many writes it makes
                self._log.append((cpu, -1))
                self._nsnap += 1
                self._wkept = True
            self.remote = False
            self.wlocal += 1
            if not rmw:
                return 0, 0.0, 0.0
            # A locked RMW waits for the store buffer to drain (Intel SDM vol. 3A, "Memory Ordering in P6 and
            # More Recent Processor Families": "locked instructions have a total order"; reads and writes are
            # not reordered with them): it executes when the storm's
            # own write has the line, then completes locally.
            w = self._wdone - now
            return (w if w > 0 else 0) + self.local_ns, 0.0, 0.0
        if cpu == self._prev and now < self._snoop:
            # Another CPU's write is in flight to this line: until its request reaches this CPU the line is
            # still Modified here, so this write completes locally, and the request waits for it (cache lock).
            self.remote = False
            self.wlocal += 1
            c = self.local_ns if rmw else 0
            if now + c > self._snoop:
                d = now + c - self._snoop
                self._snoop += d
                self._land += d
                self.free_at += d
            return c, 0.0, 0.0
        self.writes += 1
        start = self.free_at
        if start > now:
            self.qwrites += 1
            self.qwait += start - now
        else:
            start = now
        o = self.owner
        co = self.costs
        self._prev = -1
        if o == cpu:
            cost = 0.0  # no request in flight: the RMW's own cycles are in its caller's path length
            self.remote = False
        else:
            if o == SHARED and self._log is not None:
                cost = self._in(co.th, cpu)
                hit = co.hit
                for j, d in self._log:
                    cost -= d * hit[j][cpu]
                cost /= self._nsnap
            else:
                cost = co.hitm[o][cpu]
            self.remote = cost > 0
            if cost:
                self.transfers += 1
        if inv > cost:  # the readers' copies: an upgrade of the writer's own copy, or a slower RFO
            if not cost:
                self.transfers += 1
            cost = inv
            self.remote = True
        ic = int(cost)  # once (host time: an int() call fewer per write)
        n = self.nspin
        if n:
            self.storms += 1
            self.sspin += n
            fx = self._out(co.tm, cpu) / n
            # the first re-read request leaves when the first of the n spinners ends the PAUSE the invalidation
            # found it in: expected P / (n + 1) with each one's phase uniform on [0, P] (session 35)
            nd = self.pause_ns / (n + 1)
            first = fx + nd
            rest, mid = self._rest(n)
            # each spinner, from the invalidation (the writer's request reaching it) to its own re-read
            self.sstall += n * (cost * (1.0 - SNOOP_SHARE) + first + mid)
            self.free_at = start + int(cost + first + rest)
            self.owner = SHARED
            self._log = []
            self._nsnap = n
            self._wcpu = cpu
            self._wkept = False
            self._first_at = start + int(cost + nd + fx * SNOOP_SHARE)
            self._wdone = start + ic
            return start - now + ic, first, mid
        self.free_at = start + ic
        if self.remote and o >= 0:  # taken from an exclusive owner: in flight until the transfer ends
            self._prev = o
            self._req = cpu
            self._land = self.free_at
            self._snoop = start + int(ic * SNOOP_SHARE)
        self.owner = cpu
        self._log = None
        self._wcpu = -1
        return start - now + ic, 0.0, 0.0

    def rmw(self, cpu: int, now: int) -> int:
        """A locked RMW by ``cpu``: ns until it completes."""
        return self.write(cpu, now, True)[0]
