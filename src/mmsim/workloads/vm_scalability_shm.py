"""vm-scalability ``case-shm-pread-seq`` (teawater/vm-scalability @ 96c94369e0cb, as LKP runs it).

The case script::

    create_sparse_file $SHM_FILE $shm_size
    [ -n "$unit_size" ] || unit_size=$((shm_size / 2))
    $USEMEM -n $nr_task -f $SHM_FILE --readonly $unit_size

``SHM_FILE`` is on the tmpfs ``mount_tmpfs`` mounts (``size=100%``: ``shm_size``
= MemTotal here), a sparse file of ``shm_size`` bytes. ``usemem -f`` sets
``MAP_SHARED`` and ``--readonly`` gives ``PROT_READ``: each of the ``nr_task``
forked processes maps ``unit_size`` bytes of the *same* file from offset 0
(``map_offset`` 0) and reads every 8-byte word in order (``do_rw_once``)
until usemem's runtime is up. So every process read-faults the same pages:
the first to reach a hole allocates it into the page cache
(``shmem_fault``), the others wait on its folio lock or map it by
fault-around (``filemap_map_pages``, 16 pages a fault).

LKP (programs/vm-scalability/run, lkp-tests @ bbbc29c495d9) with ``size``
set: ``size = size * nr_node``; for shm cases ``unit_size = shm_size * nr_cpu
/ 2`` capped at ``size`` (or LKP's ``unit_size`` parameter). The reads stop at
the runtime or at the end of the mapping; mmsim also stops at the end of the
file (a read past EOF would be SIGBUS).

usemem credits ``bytes / 8`` for the mapping itself (``do_unit``:
``rw_bytes = bytes / 8``) on top of the bytes read. A run that reads its
whole mapping keeps that credit in proportion to the reading (throughput
ratios between kernels are then read-rate ratios); a run cut short by the
runtime does not, so shortened runs should set ``unit_size`` small enough to
be read to the end.

Throughput as usemem prints it and LKP sums: per process ``unit_bytes /
delta_us`` KB/s (:class:`~mmsim.workloads.vm_scalability.UsememCase`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.mm import memory
from mmsim.mm.mmap import Vma
from mmsim.mm.shmem import ShmemInode, shmem_file_setup
from mmsim.workloads.base import ParamInfo, register
from mmsim.workloads.vm_scalability import USEMEM_LOOP, UsememCase, memparse, resolve_nr_task

PAGE = 4096


def parse_seconds(v: str) -> float:
    x = float(str(v).strip())
    if not 0 < x <= 1e6:
        raise ValueError
    return x


def parse_lkp_size(v: str) -> int:
    """``auto`` / 0 (LKP's ``size`` unset) or a size (k/m/g/t)."""
    s = str(v).strip()
    return 0 if s in ("auto", "0") else memparse(s)


class ShmPreadSeq(UsememCase):
    """``case-shm-pread-seq``: N processes read one sparse tmpfs file through shared read-only mappings."""

    def __init__(self) -> None:
        super().__init__("shm-pread-seq", "usemem -n N -f $SHM_FILE --readonly: N processes read the same "
                         "sparse tmpfs file in order (shmem read faults, fault-around)", readonly=True)
        self.params["size"] = ParamInfo(
            0, "LKP's size per node (unit_size = min(shm_size * nr_cpu / 2, size * nr_node)); auto: the case "
            "script's shm_size / 2", parse_lkp_size, "auto or a size like 2t, 64g (k/m/g/t = 2^10..)")
        self.params["unit_size"] = ParamInfo(
            0, "bytes each process maps and reads (LKP's unit_size); auto: from size as LKP computes it",
            parse_lkp_size, "auto or a size like 8m, 96g (k/m/g/t = 2^10..)")
        self.params["runtime"] = ParamInfo(300.0, "-T: seconds before usemem stops (LKP's runtime)", parse_seconds,
                                           "seconds > 0, e.g. 300 or 0.02")

    def _sizes(self, system: Any, p: dict[str, Any]) -> tuple[int, int]:
        m = system.machine
        nr = resolve_nr_task(p["nr_task"], m.ncpus)
        shm_size = int(sum(n.memory_gib for n in m.nodes) * (1 << 30))  # tmpfs size=100%
        if p["unit_size"]:
            unit = p["unit_size"]
        elif p["size"]:
            unit = min(shm_size * m.ncpus // 2, p["size"] * len(m.nodes))
        else:
            unit = shm_size // 2
        if unit < PAGE:
            raise UserError("-p unit_size", p["unit_size"] or p["size"], "at least 4k")
        return nr, unit

    def command(self, p: dict[str, Any]) -> str:
        return f"usemem -n {p['nr_task']} -T {p['runtime']:g} -f /tmp/vm-scalability-tmp/sparse-shm-pread-seq " \
               "--readonly $unit_size"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        super().setup(system, p)
        shm_size = int(sum(n.memory_gib for n in system.machine.nodes) * (1 << 30))
        system.workload_state["inode"] = shmem_file_setup(system, 0, shm_size)  # create_sparse_file

    def _child(
        self, system: Any, t: Task, p: dict[str, Any], pre_vma: Vma | None, done_bytes: int
    ) -> Generator[Any, Any, None]:
        st = system.workload_state
        inode: ShmemInode = st["inode"]
        per = st["per"]
        vma = yield from t.mm.do_mmap(t, per, anon=False, shared=True, file=inode)
        rw_bytes = per // 8
        st["ready"] += 1
        if st["ready"] == st["nr"] and "parent_waiting" in st:
            system.sched.wake_up(st["parent_waiting"])
        yield system.sched.sleep(t)
        deadline = st["start"] + int(p["runtime"] * 1e9)
        end = vma.start + min(per, inode.size)
        rw_bytes += yield from self._read_file(system, t, vma, inode, end, deadline)
        unit_bytes = done_bytes + rw_bytes
        delta_us = max(1, (system.engine.now - st["start"]) // 1000)
        st["tput"].append(((unit_bytes * 1_000_000) >> 10) / delta_us)
        st["unit_bytes"].append(unit_bytes)
        # the same bytes over the time from GO: the rate a run that lasts until usemem's deadline keeps
        st.setdefault("tput_go", []).append(
            ((unit_bytes * 1_000_000) >> 10) / max(1, (system.engine.now - st["go"]) // 1000))
        st["done"] += 1
        if st["done"] == st["nr"] and "joiner" in st:
            system.sched.wake_up(st["joiner"])

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        from mmsim.mm.shmem import shmem_metrics

        st = system.workload_state
        # S (main's start_time to GO: forks, mmaps, synchronize_tasks) and the processes' KB/s from GO: a
        # run cut by the runtime T prints throughput_from_go x (T - S) / T (docs/fault-front-half.md, session 20)
        go = {"vm-scalability.startup_seconds": (st["go"] - st["start"]) / 1e9 if "go" in st else 0.0,
              "vm-scalability.throughput_from_go": float(sum(st.get("tput_go", [])))}
        return {**super().metrics(system, p), **go, **shmem_metrics(system)}

    def _read_file(
        self, system: Any, t: Task, vma: Vma, inode: ShmemInode, end: int, deadline: int
    ) -> Generator[Any, Any, int]:
        """``do_rw_once --readonly`` over the mapping: a read fault where the PTE is none, then the
        8-byte loads of the page through the LLC model (the page cache page's key, shared by all)."""
        bits = t.mm.pgtables.pte_bitmap
        func = "usemem [user]"
        addr = vma.start
        pending = 0
        while addr < end:
            if not bits(addr >> 21)[(addr >> 12) & 511]:
                yield from memory.handle_mm_fault(t, t.mm, vma, addr, write=False, pre_ns=pending)
                pending = 0
            idx = (addr - vma.start) >> 12
            node = inode.pages[idx]
            pending += memory.user_access(t, system, node, inode.key(idx), 1, 0, 1, False, USEMEM_LOOP, func,
                                          pending)
            addr += PAGE
            if system.engine.now + pending > deadline:
                break
        if pending:
            yield pending
        return addr - vma.start


register(ShmPreadSeq())
