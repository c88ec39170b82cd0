"""Guards for running workloads on the real host.

* :func:`check_memory`: a run may use at most :data:`MEM_FRACTION` of
  MemAvailable, so native mode never pushes the host (shared with other
  users) into reclaim, swap or the OOM killer.
* :class:`HugetlbPool`: grows ``/proc/sys/vm/nr_hugepages`` for a run (root
  only) and puts the old value back on exit, on Ctrl-C (KeyboardInterrupt),
  on SIGTERM/SIGHUP (turned into :class:`Interrupted`) and on errors.
* :class:`Reaper`: the workload runs as its own process group; whatever
  happens, the group is killed and every child waited for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType, TracebackType

from mmsim.errors import UserError
from mmsim.native import sysinfo

# At most half of MemAvailable: leaves the other half to the page cache and to
# the other users of the host, and keeps a run well clear of reclaim (whose
# cost would then be measured instead of the fault path).
MEM_FRACTION = 0.5


class Skip(Exception):
    """A case that cannot run on this host (no root, no hugetlb, no THP); the message says why."""


class Interrupted(Exception):
    """SIGTERM or SIGHUP arrived while a native run held host resources."""


def check_memory(field: str, nbytes: int, available: int | None = None) -> None:
    """UserError when ``nbytes`` exceeds MEM_FRACTION of MemAvailable."""
    avail = sysinfo.mem_available_bytes() if available is None else available
    limit = int(avail * MEM_FRACTION)
    if nbytes > limit:
        raise UserError(field, nbytes, f"at most {limit} bytes ({MEM_FRACTION:.0%} of MemAvailable = {avail} bytes)")


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

    def __init__(self, pages: int, path: Path = sysinfo.NR_HUGEPAGES) -> None:
        self.pages = pages
        self.path = path
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
            self.path.write_text(str(self.saved + self.pages - free))
        except OSError as e:
            self.restore()
            raise Skip(f"cannot resize the hugetlb pool: {e.strerror}") from None
        got = self._free()
        if got < self.pages:
            self.restore()
            raise Skip(f"hugetlb pool grew to only {got} free huge pages of {self.pages} needed (fragmented memory)")
        return self

    def restore(self) -> None:
        if self.saved is None:
            return
        for _ in range(50):  # pages still mapped by an exiting child are freed a moment later
            try:
                self.path.write_text(str(self.saved))
                if self._read() == self.saved:
                    break
            except OSError:
                pass
            time.sleep(0.02)
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
                 vm: Path = sysinfo.NR_HUGEPAGES.parent) -> None:
        self.need = need
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
                self.saved[path] = _read_int(path)
                path.write_text(str(value))
        except OSError as e:
            self.restore()
            raise Skip(f"cannot set the hugetlb sysctls: {e.strerror}") from None
        if self._room() < self.need:
            room = self._room()
            self.restore()
            raise Skip(f"hugetlb would get only {room} of the {self.need} huge pages needed")
        return self

    def restore(self) -> None:
        for path, value in reversed(list(self.saved.items())):
            for _ in range(50):  # pages of an exiting child are freed a moment later
                try:
                    path.write_text(str(value))
                    if _read_int(path) == value:
                        break
                except OSError:
                    pass
                time.sleep(0.02)
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
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False
