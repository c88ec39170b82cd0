"""lmbench3 ``bw_unix``: AF_UNIX stream socket bandwidth, as LKP's lmbench3
job runs it (``bw_unix -P <pairs>``), reported as LKP's
``lmbench3.AF_UNIX.sock.stream.bandwidth.MB/sec``.

lmbench's ``bw_unix.c``: each of the ``-P`` benchmark processes makes a
``socketpair(AF_UNIX, SOCK_STREAM)`` and forks a writer. Per iteration the
reader writes the byte count (``-M``, default ``XFER`` = 10 MiB) to a control
pipe, the writer ``write()``s it in ``-m`` chunks (``XFERSIZE`` = 64 KiB) and
the reader ``read()``s ``-m`` at a time until it has it all. lmbench prints
``mb(get_n() * parallel * XFER)``: total bytes / elapsed / 2^20.

Model choices (stated, not hidden): each pair runs ``warmup`` untimed
iterations then ``repetitions`` timed ones (lmbench's ``-W`` is a time and
``benchmp`` picks the iteration count; here both are counts); the bandwidth
is pairs × timed bytes / the median pair's timed duration. Tasks stay on
the CPUs the scheduler would spread them to on an idle machine: one
physical core each, pairs alternating between sockets (load balancing across
nodes), reader and writer of a pair on neighbouring cores of one socket
(wake-affine keeps them in one LLC); past one task per core, SMT siblings.
This is a sourced approximation of v6.6's placement, argued from
``find_idlest_group``, ``wake_affine_idle`` and ``select_idle_sibling`` in
docs/pcp-free-high.md ("Task placement").

Oversubscription (more tasks than CPUs, as LKP's ``nr_threads: 200%``): the
first ``ncpus // 2`` pairs are placed as above, and the tasks of the pairs
beyond go round-robin over that same list of CPUs (pair ``i`` on the CPUs of
pair ``i mod (ncpus // 2)``; an odd last CPU and a 1-CPU machine take tasks
too). The load balancer evens ``nr_running`` over the CPUs, and reusing the
idle-machine order keeps each reader next to its writer in one LLC as
wake-affine would; tasks do not migrate. The scheduler then time-shares each
CPU in v6.6 CFS/EEVDF slices (:mod:`mmsim.engine.cpu`), with a preemption
point at every return to user space (after each ``read()``/``write()``).
"""

from __future__ import annotations

from collections.abc import Generator
from statistics import median
from typing import Any

from mmsim.engine.core import Task
from mmsim.metrics.counters import CACHE_MISSES, CACHE_REFERENCES
from mmsim.mm.costs import path
from mmsim.net.af_unix import UnixSock, socketpair, unix_stream_recvmsg, unix_stream_sendmsg
from mmsim.workloads.base import ParamInfo, parse_int, register

XFERSIZE = 64 * 1024  # lmbench bench.h
XFER = 10 * 1024 * 1024  # bw_unix.c
MB = 1024 * 1024  # lmbench bench.h: mb() divides by MB = 2^20


def parse_lm_bytes(v: str) -> int:
    """lmbench's ``bytes()``: k/m suffixes are powers of 1024."""
    s = str(v).strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(s[-1:], 1)
    num = s[:-1] if s[-1:] in "kmg" else s
    if not num.isdigit() or int(num) == 0:
        raise ValueError
    return int(num) * mult


def pair_cpus(machine: Any, pairs: int) -> list[tuple[int, int]]:
    """(reader CPU, writer CPU) of each pair: see the module docstring."""
    if 2 * pairs > machine.ncpus:  # oversubscribed: round-robin over the idle-machine order
        flat = [c for pr in _spread(machine, machine.ncpus // 2) for c in pr]
        flat += [c for c in range(machine.ncpus) if c not in flat]
        return [(flat[2 * i % len(flat)], flat[(2 * i + 1) % len(flat)]) for i in range(pairs)]
    return _spread(machine, pairs)


def _spread(machine: Any, pairs: int) -> list[tuple[int, int]]:
    ns = len(machine.sockets)
    cores = machine.sockets[0].cores
    out = []
    for i in range(pairs):
        sock = i % ns
        k = 2 * (i // ns)  # this pair's first core index on its socket
        smt, k = divmod(k, cores)
        base = sock * cores + smt * machine.ncores
        out.append((base + k, base + k + 1))
    return out


class BwUnix:
    name = "lmbench/bw_unix"
    description = "lmbench3 bw_unix: P process pairs stream over AF_UNIX sockets; aggregate MB/sec"
    params = {
        "pairs": ParamInfo(1, "-P: parallelism (reader/writer process pairs)", parse_int(1), "an integer >= 1"),
        "msg": ParamInfo(XFERSIZE, "-m: bytes per write()/read() (XFERSIZE = 64k)", parse_lm_bytes,
                         "a size like 64k"),
        "bytes": ParamInfo(XFER, "-M: bytes per iteration (XFER = 10m)", parse_lm_bytes, "a size like 10m"),
        "warmup": ParamInfo(1, "untimed iterations per pair (lmbench -W is a time)", parse_int(0),
                            "an integer >= 0"),
        "repetitions": ParamInfo(3, "timed iterations per pair (lmbench -N)", parse_int(1), "an integer >= 1"),
    }

    def command(self, p: dict[str, Any]) -> str:
        return f"bw_unix -P {p['pairs']} -m {p['msg']} -M {p['bytes']}"

    def setup(self, system: Any, p: dict[str, Any]) -> None:
        m = system.machine
        if 2 * p["pairs"] > m.ncpus:
            system.sched.enable_time_sharing()
        if p["bytes"] % p["msg"]:  # bw_unix.c rounds the total up to a multiple of xfer
            p["bytes"] += p["msg"] - p["bytes"] % p["msg"]
        st: dict[str, Any] = {"durations": [], "ends": [], "refs": 0, "misses": 0}
        system.workload_state = st
        for i, (rcpu, wcpu) in enumerate(pair_cpus(m, p["pairs"])):
            wsk, rsk = socketpair(system, wcpu, rcpu)
            ctl: dict[str, Any] = {"todo": 0, "waiter": None}
            reader = Task(2 * i, f"bw_unix/{i}", cpu=rcpu)
            writer = Task(2 * i + 1, f"bw_unix/{i}w", cpu=wcpu)
            system.sched.spawn(reader, self._reader(system, reader, rsk, ctl, p, (rcpu, wcpu)))
            system.sched.spawn(writer, self._writer(system, writer, wsk, ctl, p))

    def _reader(
        self, s: Any, t: Task, sk: UnixSock, ctl: dict[str, Any], p: dict[str, Any], cpus: tuple[int, int],
    ) -> Generator[Any, Any, None]:
        start = 0
        perf = s.counters.perf
        refs0 = miss0 = 0
        pipe_ns, pipe_ins = path("pipe_write", s.machine.freq_ghz)
        for it in range(p["warmup"] + p["repetitions"]):
            if it == p["warmup"]:
                start = s.engine.now
                refs0 = sum(perf[c][CACHE_REFERENCES] for c in cpus)
                miss0 = sum(perf[c][CACHE_MISSES] for c in cpus)
            ctl["todo"] += p["bytes"]  # write(control[1], &todo, sizeof(todo))
            yield s.counters.busy(t.cpu, "pipe_write", pipe_ns, pipe_ins)
            if ctl["waiter"] is not None:
                w, ctl["waiter"] = ctl["waiter"], None
                ipi = s.sched.wake_up(w, waker_cpu=t.cpu)
                if ipi:
                    yield ipi
            yield from s.sched.user_return(t)
            done = 0
            while done < p["bytes"]:
                done += yield from unix_stream_recvmsg(t, sk, p["msg"])
                yield from s.sched.user_return(t)
        st = s.workload_state
        st["refs"] += sum(perf[c][CACHE_REFERENCES] for c in cpus) - refs0
        st["misses"] += sum(perf[c][CACHE_MISSES] for c in cpus) - miss0
        st["durations"].append(s.engine.now - start)
        st["ends"].append(s.engine.now)
        s.elapsed_ns = max(s.elapsed_ns, s.engine.now)

    def _writer(
        self, s: Any, t: Task, sk: UnixSock, ctl: dict[str, Any], p: dict[str, Any],
    ) -> Generator[Any, Any, None]:
        pipe_ns, pipe_ins = path("pipe_write", s.machine.freq_ghz)
        for _ in range(p["warmup"] + p["repetitions"]):
            while not ctl["todo"]:  # read(controlfd, &todo, sizeof(todo))
                ctl["waiter"] = t
                yield s.sched.sleep(t)
            todo, ctl["todo"] = ctl["todo"], 0
            yield s.counters.busy(t.cpu, "pipe_read", pipe_ns, pipe_ins)
            yield from s.sched.user_return(t)
            done = 0
            while done < todo:
                done += yield from unix_stream_sendmsg(t, sk, p["msg"])
                yield from s.sched.user_return(t)

    def metrics(self, system: Any, p: dict[str, Any]) -> dict[str, float]:
        st = system.workload_state
        d = median(st["durations"]) if st["durations"] else 0
        bw = p["pairs"] * p["repetitions"] * p["bytes"] / (d / 1e9) / MB if d else 0.0
        cache = system.cache
        return {
            "lmbench3.AF_UNIX.sock.stream.bandwidth.MB/sec": round(bw, 2),
            "bw_unix.timed_seconds": d / 1e9,
            # perf's cache-misses / cache-references on the pairs' CPUs over the timed iterations
            "bw_unix.llc_miss_rate": st["misses"] / st["refs"] if st["refs"] else 0.0,
            "bw_unix.reused_hot_pages": cache.alloc_hot_pages,
            "bw_unix.cold_pages": cache.alloc_cold_pages,
        }


register(BwUnix())
