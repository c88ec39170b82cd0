"""Guards for running workloads on the real host.

* :func:`check_host_memory`: a run may reserve at most :data:`MEM_FRACTION`
  of MemAvailable, counting every parameter that takes host memory (the
  footprint: size, or per-task size x tasks; the persistent hugetlb pool
  growth ``nr_hugepages``; the surplus limit ``nr_overcommit_hugepages``),
  before anything is written, so native mode never pushes the host (shared
  with other users) into reclaim, swap or the OOM killer.
* :class:`HugetlbPool` / :class:`HugetlbSysctls`: set ``/proc/sys/vm`` hugetlb
  knobs for a run (root only). Every write goes through :func:`write_sysctl`,
  which first records the old value in the run's
  :class:`~mmsim.native.journal.Journal` and re-checks the cap; the old value
  is put back on exit, on Ctrl-C (KeyboardInterrupt), on SIGTERM/SIGHUP
  (turned into :class:`Interrupted`) and on errors, and after SIGKILL by the
  next run's :func:`~mmsim.native.journal.recover`.
* :class:`Reaper`: the workload runs as its own process group; whatever
  happens, the group is killed and every child waited for. The worker also
  dies with its parent (PR_SET_PDEATHSIG, and a pipe it watches).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from mmsim.errors import UserError
from mmsim.native import sysinfo
from mmsim.native.journal import Journal, _group_members

# At most half of MemAvailable: leaves the other half to the page cache and to
# the other users of the host, and keeps a run well clear of reclaim (whose
# cost would then be measured instead of the fault path).
MEM_FRACTION = 0.5
HPAGE = sysinfo.HPAGE_BYTES
PR_SET_PDEATHSIG = 1  # include/uapi/linux/prctl.h

# The two parameters whose product is a workload's footprint: per-task size and task count
# (vm-scalability's size is already the total over nr_task).
FOOTPRINT_FIELDS = {
    "will-it-scale/page_fault1": ("memsize", "nr_task"),
    "will-it-scale/page_fault2": ("memsize", "nr_task"),
    "will-it-scale/page_fault3": ("memsize", "nr_task"),
    "lmbench/bw_unix": ("msg", "pairs"),
    "thp_memscale": ("bytes", "threads"),
}


def memory_limit(available: int | None = None) -> tuple[int, int]:
    """(the cap in bytes, MemAvailable it is a fraction of)."""
    avail = sysinfo.mem_available_bytes() if available is None else available
    return int(avail * MEM_FRACTION), avail


def _limit_text(limit: int, avail: int) -> str:
    return f"at most {limit} bytes ({MEM_FRACTION:.0%} of MemAvailable = {avail} bytes)"


def check_memory(field: str, nbytes: int, available: int | None = None) -> None:
    """UserError when ``nbytes`` exceeds MEM_FRACTION of MemAvailable."""
    limit, avail = memory_limit(available)
    if nbytes > limit:
        raise UserError(field, nbytes, _limit_text(limit, avail))


def reservations(workload: str, params: dict[str, Any], footprint: int,
                 pool_pages: int | None = None) -> list[tuple[str, Any, int, str]]:
    """Each way a run takes host memory: (``-p`` field, its value, bytes, what).

    ``nr_hugepages`` counts the pages the persistent pool grows by (the
    runner grows it to at least that, never shrinks it); the surplus limit
    ``nr_overcommit_hugepages`` counts whole, since while it is in force any
    process may take surplus pages up to it.
    """
    size_f, count_f = FOOTPRINT_FIELDS.get(workload, ("size", "nr_task"))
    what = f"{size_f} x {count_f}" if workload in FOOTPRINT_FIELDS else "the run's anonymous memory"
    out: list[tuple[str, Any, int, str]] = [(f"-p {size_f}", params.get(size_f), footprint, what)]
    if "nr_hugepages" in params:
        cur = sysinfo.hugetlb_pool_pages() if pool_pages is None else pool_pages
        grow = max(0, int(params["nr_hugepages"]) - (cur or 0))
        out.append(("-p nr_hugepages", params["nr_hugepages"], grow * HPAGE,
                    f"{grow} huge pages added to the persistent pool"))
    if "nr_overcommit_hugepages" in params:
        from mmsim.native.workloads import overcommit_pages

        oc = overcommit_pages(params)
        out.append(("-p nr_overcommit_hugepages", params["nr_overcommit_hugepages"], oc * HPAGE,
                    f"up to {oc} surplus huge pages"))
    return out


def check_host_memory(workload: str, params: dict[str, Any], footprint: int, available: int | None = None,
                      pool_pages: int | None = None) -> int:
    """UserError naming the field when the run would reserve more than the cap; returns the bytes reserved.

    Each reservation alone, then the run's total: the larger of the footprint
    and the hugetlb pool growth plus the surplus limit (the run's own pages
    come out of those).
    """
    limit, avail = memory_limit(available)
    items = reservations(workload, params, footprint, pool_pages)
    for field, value, nbytes, what in items:
        if nbytes > limit:
            raise UserError(field, value, f"{_limit_text(limit, avail)}; this reserves {nbytes} bytes ({what})")
    hugetlb = sum(n for f, _, n, _ in items[1:])
    total = max(footprint, hugetlb)
    if total > limit:
        field, value = max(items, key=lambda i: i[2])[:2]
        parts = ", ".join(f"{f.removeprefix('-p ')} {n}" for f, _, n, _ in items[1:])
        raise UserError(field, value, f"{_limit_text(limit, avail)} in all; hugetlb reserves {hugetlb} bytes "
                        f"({parts})")
    return total


def write_sysctl(path: Path, value: int, journal: Journal | None) -> None:
    """The one place native mode writes the kernel: record the old value in ``journal`` (fsync'd) and re-check
    the memory cap for pool growth, then write."""
    old = _read_int(path)
    if path.name in ("nr_hugepages", "nr_overcommit_hugepages") and value > old:
        limit, avail = memory_limit()
        if (value - old) * HPAGE > limit:
            raise UserError(f"vm.{path.name}", value, f"{_limit_text(limit, avail)}; growing it by {value - old} "
                            f"huge pages reserves {(value - old) * HPAGE} bytes")
    if journal is not None:
        journal.record_sysctl(path, old)
    path.write_text(str(value))


def _restore_sysctl(path: Path, value: int, journal: Journal | None) -> None:
    for _ in range(50):  # pages still mapped by an exiting child are freed a moment later
        try:
            path.write_text(str(value))
            if _read_int(path) == value:
                if journal is not None:
                    journal.forget_sysctl(path)
                return
        except OSError:
            pass
        time.sleep(0.02)


class Skip(Exception):
    """A case that cannot run on this host (no root, no hugetlb, no THP); the message says why."""


class Interrupted(Exception):
    """SIGTERM or SIGHUP arrived while a native run held host resources."""


@contextmanager
def terminate_as_exception() -> Iterator[None]:
    """SIGTERM/SIGHUP raise :class:`Interrupted` (so ``finally`` blocks run) while inside."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class HugetlbPool:
    """Make ``pages`` default-size huge pages free for one run, then restore the pool.

    Writes ``/proc/sys/vm/nr_hugepages`` (mm/hugetlb.c hugetlb_sysctl_handler
    -> set_max_huge_pages); the kernel may grant fewer pages than asked when
    memory is fragmented, which is a :class:`Skip`, as are no root and no
    hugetlb support.
    """

    def __init__(self, pages: int, path: Path = sysinfo.NR_HUGEPAGES, journal: Journal | None = None) -> None:
        self.pages = pages
        self.path = path
        self.journal = journal
        self.saved: int | None = None

    def _read(self) -> int:
        return int(self.path.read_text().strip())

    def _free(self) -> int:
        return sysinfo.read_meminfo().get("HugePages_Free", 0)

    def __enter__(self) -> HugetlbPool:
        if not self.path.exists():
            raise Skip("kernel without hugetlb support (no /proc/sys/vm/nr_hugepages)")
        free = self._free()
        if free >= self.pages:
            return self  # the pool already has room: nothing to change, nothing to restore
        if not sysinfo.is_root():
            raise Skip(f"hugetlb needs {self.pages} free huge pages ({free} free); growing the pool needs root")
        self.saved = self._read()
        try:
            write_sysctl(self.path, self.saved + self.pages - free, self.journal)
        except OSError as e:
            self.restore()
            raise Skip(f"cannot resize the hugetlb pool: {e.strerror}") from None
        except BaseException:
            self.saved = None  # nothing was written
            raise
        got = self._free()
        if got < self.pages:
            self.restore()
            raise Skip(f"hugetlb pool grew to only {got} free huge pages of {self.pages} needed (fragmented memory)")
        return self

    def restore(self) -> None:
        if self.saved is None:
            return
        _restore_sysctl(self.path, self.saved, self.journal)
        self.saved = None

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.restore()


class HugetlbSysctls:
    """vm-scalability's ``setup_hugetlb`` for one run: set ``nr_overcommit_hugepages``
    (surplus pages from the buddy allocator, mm/hugetlb.c ``alloc_surplus_hugetlb_folio``)
    and grow ``nr_hugepages`` to at least ``persistent``; both put back on exit.

    Writing needs root; without it the run goes ahead only if the settings in
    force already give ``need`` pages, else it is a :class:`Skip`.
    """

    def __init__(self, need: int, persistent: int = 0, overcommit: int | None = None,
                 vm: Path = sysinfo.NR_HUGEPAGES.parent, journal: Journal | None = None) -> None:
        self.need = need
        self.journal = journal
        self.want: dict[Path, int] = {}
        self.vm = vm
        self.persistent = persistent
        self.overcommit = overcommit
        self.saved: dict[Path, int] = {}

    def _room(self) -> int:
        """Huge pages a new mapping can still get: free ones plus surplus headroom."""
        mi = sysinfo.read_meminfo()
        oc = _read_int(self.vm / "nr_overcommit_hugepages")
        return mi.get("HugePages_Free", 0) + max(0, oc - mi.get("HugePages_Surp", 0))

    def __enter__(self) -> HugetlbSysctls:
        hp, oc = self.vm / "nr_hugepages", self.vm / "nr_overcommit_hugepages"
        if not hp.exists() or not oc.exists():
            raise Skip(f"kernel without hugetlb support (no {hp})")
        if self.persistent > _read_int(hp):
            self.want[hp] = self.persistent
        if self.overcommit is not None and self.overcommit != _read_int(oc):
            self.want[oc] = self.overcommit
        if self.want and not sysinfo.is_root():
            if self._room() >= self.need:
                return self  # the settings in force already suffice
            raise Skip(f"hugetlb needs {self.need} huge pages ({self._room()} available); setting "
                       + ", ".join(f"{p.name}={v}" for p, v in self.want.items()) + " needs root")
        try:
            for path, value in self.want.items():
                old = _read_int(path)
                write_sysctl(path, value, self.journal)
                self.saved[path] = old
        except OSError as e:
            self.restore()
            raise Skip(f"cannot set the hugetlb sysctls: {e.strerror}") from None
        except BaseException:
            self.restore()
            raise
        if self._room() < self.need:
            room = self._room()
            self.restore()
            raise Skip(f"hugetlb would get only {room} of the {self.need} huge pages needed")
        return self

    def restore(self) -> None:
        for path, value in reversed(list(self.saved.items())):
            _restore_sysctl(path, value, self.journal)
        self.saved.clear()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.restore()


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


class Reaper:
    """Own a worker process group: kill it and reap the leader on exit, whatever the exit."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def __enter__(self) -> Reaper:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        kill_group(self.proc)


GROUP_EXIT_WAIT_S = 10.0  # how long to wait for killed tasks to finish exiting (tearing down large mms)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group led by ``proc`` (started with start_new_session), reap the
    leader, and wait until no member of the group is left.

    After a normal run the group is already empty (the worker reaps its tasks),
    so this returns at once. After an interrupt, tasks the worker forked are
    orphans we cannot wait for; SIGKILL is asynchronous and a task with a large
    address space takes a moment to exit, so poll until they are gone.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    while time.monotonic() < deadline and _group_alive(proc.pid):
        time.sleep(0.01)


def _group_alive(pgid: int) -> bool:
    """Some member of process group ``pgid`` is still running (zombies awaiting init do not count)."""
    return bool(_group_members(pgid))


def die_with_parent(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets SIGKILL when the thread that started it dies (PR_SET_PDEATHSIG,
    kernel/exit.c forget_original_parent), and exits at once if that already happened."""

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return setup
