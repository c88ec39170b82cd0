"""will-it-scale (Anton Blanchard) ``page_fault1``, as LKP runs it: ``nr_task``
copies, each bound to its own CPU (cores first, then SMT siblings), as
processes or as threads of one process, each looping

    c = mmap(NULL, MEMSIZE, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    for (i = 0; i < MEMSIZE; i += pagesize) { c[i] = 0; (*iterations)++; }
    munmap(c, MEMSIZE);

with MEMSIZE = 128 MiB. Every first write to a page faults (a 4 KiB page, or
a THP where the kernel's ``thp`` policy and the 2 MiB alignment allow); the
munmap frees everything through the page allocator, so the allocator, its
PCP lists and ``zone->lock`` see both sides. LKP reports
``will-it-scale.per_process_ops`` (or ``per_thread_ops``): iterations per
second per task, and ``will-it-scale.workload``: their sum. Here each task
runs ``loops`` rounds (will-it-scale runs for a fixed time instead).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.errors import UserError
from mmsim.mm import memory
from mmsim.mm.mmap import MmStruct
from mmsim.mm.munmap import do_munmap
from mmsim.mm.pgtable import PMD_HUGE, PMD_TABLE
from mmsim.workloads.base import ParamInfo, parse_choice, parse_int, register
from mmsim.workloads.lmbench import parse_lm_bytes

MEMSIZE = 128 * 1024 * 1024  # page_fault1.c
PAGE = 4096


class PageFault1:
    name = "will-it-scale/page_fault1"
    description = "will-it-scale page_fault1: mmap 128M, write every page, munmap; ops = pages written"
    params = {
        "nr_task": ParamInfo(1, "tasks, one per CPU (cores first)", parse_int(1), "an integer >= 1"),
        "mode": ParamInfo("processes", "processes (own mm each) or threads (one mm)",
                          parse_choice("processes", "threads"), "processes, threads"),
        "memsize": ParamInfo(MEMSIZE, "bytes mapped per round (MEMSIZE = 128m)", parse_lm_bytes,
                             "a size like 128m"),
        "loops": ParamInfo(1, "mmap/write/munmap rounds per task", parse_int(1), "an integer >= 1"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"page_fault1_{p['mode']} -t {p['nr_task']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        n = p["nr_task"]
        if n > m.ncpus:
            raise UserError("-p nr_task", n, f"at most {m.ncpus} on {m.name} (one CPU per task)")
        system.page_alloc.track_owners = True
        cpus = list(range(n))
        shared = MmStruct(system, home_cpu=0) if p["mode"] == "threads" else None
        st: dict[str, Any] = {"ops": [0] * n, "spans": [0] * n}
        system.workload_state = st
        for i in cpus:
            mm = shared if shared is not None else MmStruct(system, home_cpu=i)
            t = Task(i, f"page_fault1/{i}", cpu=i, mm=mm)
            system.sched.spawn(t, self._task(system, t, i, cpus if shared is not None else [i], p))

    def _task(self, s: Any, t: Task, i: int, mm_cpus: list[int], p: dict[str, Any]) -> Generator[Any, Any, None]:
        mm: MmStruct = t.mm
        st = s.workload_state
        start = s.engine.now
        store_ns = int(s.machine.cache("L3").latency_ns)  # c[i] = 0 on a page already cleared by the kernel
        for _ in range(p["loops"]):
            vma = yield from mm.do_mmap(t, p["memsize"])
            pt = mm.pgtables
            pending = 0
            for addr in range(vma.start, vma.end, PAGE):
                slot = addr >> 21
                state = pt.pmd.get(slot)
                if state != PMD_HUGE and not (state == PMD_TABLE and pt.ptes[slot][(addr >> 12) & 511]):
                    yield from memory.handle_mm_fault(t, mm, vma, addr, pre_ns=pending)
                    pending = 0
                pending += s.counters.busy(t.cpu, "page_fault1 [user]", store_ns)
                st["ops"][i] += 1
            if pending:
                yield pending
            yield from do_munmap(t, mm, vma, mm_cpus)
        st["spans"][i] = s.engine.now - start
        s.elapsed_ns = max(s.elapsed_ns, s.engine.now)

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        rates = [ops / (ns / 1e9) for ops, ns in zip(st["ops"], st["spans"], strict=True) if ns]
        per = "per_thread_ops" if p["mode"] == "threads" else "per_process_ops"
        return {
            f"will-it-scale.{per}": round(sum(rates) / len(rates), 2) if rates else 0.0,
            "will-it-scale.workload": round(sum(rates), 2),
        }


register(PageFault1())
