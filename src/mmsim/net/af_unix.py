"""AF_UNIX stream sockets (net/unix/af_unix.c, v6.6).

``unix_stream_sendmsg`` cuts a write into skbs of at most
``min(sk_sndbuf / 2 - 64, SKB_MAX_HEAD(0) + UNIX_SKB_FRAGS_SZ)`` bytes — 36544
with the default ``sk_sndbuf`` (212992) — each with ``size - data_len`` bytes
of linear head and ``data_len = PAGE_ALIGN(size - SKB_MAX_HEAD(0))`` bytes in
page fragments of order up to ``get_order(UNIX_SKB_FRAGS_SZ)`` = 3
(``sock_alloc_send_pskb`` → ``alloc_skb_with_frags``). The writer sleeps in
``sock_alloc_send_pskb`` while ``sk_wmem_alloc >= sk_sndbuf``, charges each
skb's truesize to its own socket (``skb_set_owner_w``), queues it on the
peer's receive queue under ``unix_state_lock(other)`` and wakes the reader
(``sk_data_ready``). The reader (``unix_stream_read_generic``) copies from
the queued skbs into its buffer; a fully consumed skb is unlinked and freed
on the *reader's* CPU (``consume_skb``: the pages go to that CPU's PCP, the
truesize back to the writer's ``sk_wmem_alloc`` in ``sock_wfree``, whose
``unix_write_space`` wakes the writer once ``wmem_alloc * 4 <= sk_sndbuf``).
An empty queue puts the reader to sleep (``unix_stream_data_wait``) unless it
already has data (the default ``SO_RCVLOWAT`` target is one byte).

The ``sk_buff`` and the skb head come from SLUB caches (``skbuff_head_cache``;
``kmalloc-4k`` for a full head, ``skbuff_small_head`` for a short one) on the
writer's CPU and go back on the reader's (:mod:`mmsim.net.skbuff`,
:mod:`mmsim.mm.slub`). ``&u->lock`` stands for both ``unix_state_lock`` and
the receive queue's lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import Any

from mmsim.engine.core import Task
from mmsim.locks.rwsem import AtomicCounter
from mmsim.locks.spinlock import Spinlock
from mmsim.mm.costs import path
from mmsim.net.skbuff import (
    SKB_MAX_HEAD0,
    Skb,
    alloc_skb_with_frags,
    kfree_skbmem,
    skb_copy_from_iter,
    skb_copy_to_iter,
    skb_release_data,
)

PAGE_SIZE = 4096
UNIX_SKB_FRAGS_SZ = PAGE_SIZE << 3  # PAGE_SIZE << get_order(32768)
UNIX_SKB_ORDER = 3
SK_WMEM_DEFAULT = 212992  # net.core.wmem_default on x86-64 (SK_WMEM_MAX)


class UnixSock:
    """One end of a connected stream socket pair."""

    def __init__(self, system: Any, home_cpu: int) -> None:
        self.system = system
        self.peer: UnixSock | None = None
        self.receive_queue: deque[Skb] = deque()
        self.sndbuf = SK_WMEM_DEFAULT
        self.wmem_alloc = 0
        self.wmem = AtomicCounter(system.locks, "sk->sk_wmem_alloc", home_cpu)
        self.lock = Spinlock(system.locks, "&u->lock", system.spin_kind_for("unix_lock"), home_cpu)
        self.reader: Task | None = None  # sleeping in unix_stream_data_wait
        self.writer: Task | None = None  # sleeping in sock_wait_for_wmem
        self.cpu = home_cpu  # where the task using this end runs


def socketpair(system: Any, cpu_a: int, cpu_b: int) -> tuple[UnixSock, UnixSock]:
    """``socketpair(AF_UNIX, SOCK_STREAM)``: end ``a`` used on ``cpu_a``, ``b`` on ``cpu_b``."""
    a, b = UnixSock(system, cpu_a), UnixSock(system, cpu_b)
    a.peer, b.peer = b, a
    return a, b


def _p(system: Any, name: str) -> tuple[int, int]:
    return path(name, system.machine.freq_ghz)


def unix_stream_sendmsg(task: Task, sk: UnixSock, length: int) -> Generator[Any, Any, int]:
    """``write(fd, buf, length)`` on a stream socket; returns bytes sent."""
    s = sk.system
    c = s.counters
    cpu = task.cpu
    other = sk.peer
    assert other is not None
    ns, ins = _p(s, "unix_stream_sendmsg")
    pending = c.busy(cpu, "unix_stream_sendmsg", ns, ins)
    sent = 0
    while sent < length:
        size = min(length - sent, (sk.sndbuf >> 1) - 64, SKB_MAX_HEAD0 + UNIX_SKB_FRAGS_SZ)
        data_len = max(0, size - SKB_MAX_HEAD0)
        data_len = min(size, -(-data_len // PAGE_SIZE) * PAGE_SIZE)
        # sock_alloc_send_pskb: wait for send buffer space
        while sk.wmem_alloc >= sk.sndbuf:
            if pending:
                yield pending
                pending = 0
            sk.writer = task
            yield s.sched.sleep(task)
        skb, pending = yield from alloc_skb_with_frags(task, s, size - data_len, data_len, UNIX_SKB_ORDER, pending)
        sk.wmem_alloc += skb.truesize  # skb_set_owner_w
        pending += sk.wmem.add(task, "skb_set_owner_w")
        pending += skb_copy_from_iter(task, s, skb, other.cpu, "copy_user_enhanced_fast_string")
        yield pending
        pending = 0
        d = other.lock.acquire(task)  # unix_state_lock(other)
        if d.__class__ is not int:
            yield d
            d = 0
        ns, ins = _p(s, "skb_queue_tail")
        yield d + c.busy(cpu, "unix_stream_sendmsg", ns, ins)
        other.receive_queue.append(skb)
        other.lock.release(task)
        if other.reader is not None:  # sk_data_ready -> sock_def_readable
            r, other.reader = other.reader, None
            pending += s.sched.wake_up(r, waker_cpu=cpu)
            ns, ins = _p(s, "sock_def_readable")
            pending += c.busy(cpu, "sock_def_readable", ns, ins)
        sent += size
    if pending:
        yield pending
    return sent


def unix_stream_recvmsg(task: Task, sk: UnixSock, size: int) -> Generator[Any, Any, int]:
    """``read(fd, buf, size)`` on a stream socket; returns bytes copied."""
    s = sk.system
    c = s.counters
    cpu = task.cpu
    writer = sk.peer
    assert writer is not None
    ns, ins = _p(s, "unix_stream_recvmsg")
    pending = c.busy(cpu, "unix_stream_recvmsg", ns, ins)
    copied = 0
    while copied < size:
        yield pending
        pending = 0
        yield sk.lock.acquire(task)  # unix_state_lock(sk); skb_peek
        skb = sk.receive_queue[0] if sk.receive_queue else None
        sk.lock.release(task)
        if skb is None:
            if copied:  # copied >= target (SO_RCVLOWAT 1)
                break
            sk.reader = task  # unix_stream_data_wait
            yield s.sched.sleep(task)
            continue
        chunk = min(skb.len - skb.consumed, size - copied)
        ns, ins = _p(s, "unix_stream_read_actor")
        pending += c.busy(cpu, "unix_stream_read_generic", ns, ins)
        pending += skb_copy_to_iter(task, s, skb, chunk, "copy_user_enhanced_fast_string")
        skb.consumed += chunk
        copied += chunk
        if skb.consumed < skb.len:
            continue
        yield pending
        pending = 0
        yield sk.lock.acquire(task)  # skb_unlink
        sk.receive_queue.popleft()
        sk.lock.release(task)
        pending = yield from _consume_skb(task, writer, skb)
    if pending:
        yield pending
    return copied


def _consume_skb(task: Task, writer: UnixSock, skb: Skb) -> Generator[Any, Any, int]:
    """``consume_skb`` on the reader's CPU: the fragments go back through the
    page allocator, then ``sock_wfree`` uncharges the writer's socket."""
    s = writer.system
    c = s.counters
    cpu = task.cpu
    ns, ins = _p(s, "consume_skb")
    pending: int = c.busy(cpu, "consume_skb", ns, ins)
    pending = yield from skb_release_data(task, s, skb, pending)
    pending = yield from kfree_skbmem(task, s, skb, pending)
    writer.wmem_alloc -= skb.truesize
    pending += writer.wmem.add(task, "sock_wfree")
    if writer.writer is not None and writer.wmem_alloc << 2 <= writer.sndbuf:  # unix_writable
        w, writer.writer = writer.writer, None
        pending += s.sched.wake_up(w, waker_cpu=cpu)
        ns, ins = _p(s, "unix_write_space")
        pending += c.busy(cpu, "unix_write_space", ns, ins)
    return pending
