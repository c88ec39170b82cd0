"""usemem's access loop, natively: native/usemem.c built with ``-O`` (as vm-scalability builds
usemem.c) into a shared object and called through ctypes from the task processes.

Until session 7 the native usemem cases stored with numpy (``np.add`` into the mapping): a
vectorised fill at about 0.2 ns per word on the calibration host, where usemem's ``do_rw_once``
(one out-of-line ``do_access`` call per 8-byte word, the option globals re-read every iteration)
takes 1.5 ns per word there (:func:`cached_ns_per_word`). The two sides of ``mmsim validate``
then measured different programs; now the host runs usemem's own instruction stream.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
from pathlib import Path

import numpy as np

from mmsim.cbuild import compiled

SOURCE = Path(__file__).with_name("usemem.c")
FLAGS = ("-O", "-shared", "-fPIC", "-fvisibility=hidden")  # vm-scalability Makefile / usemem.c header: gcc -O


WIS_SOURCE = Path(__file__).with_name("wis.c")
WIS_FLAGS = ("-O2", "-shared", "-fPIC", "-fvisibility=hidden")  # will-it-scale's Makefile: -O2


class NoCompiler(RuntimeError):
    """No working C compiler: the usemem loop cannot run natively."""


@functools.cache
def _load(source: Path, name: str, flags: tuple[str, ...], what: str) -> ctypes.CDLL:
    """``source`` built once per source hash and loaded, or :class:`NoCompiler` naming ``what``."""
    so = compiled(source, name, flags)
    if so is None:
        raise NoCompiler(f"{what} needs the C helper (native/{source.name}) and no working C compiler was found")
    return ctypes.CDLL(str(so))


def lib() -> ctypes.CDLL:
    """native/usemem.c (usemem's do_rw_once loop) loaded, or :class:`NoCompiler`."""
    dll = _load(SOURCE, "usemem.so", FLAGS, "usemem's loop")
    dll.usemem_rw_once.restype = ctypes.c_ulong
    dll.usemem_rw_once.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int]
    dll.usemem_rw_blocks.restype = ctypes.c_ulong
    dll.usemem_rw_blocks.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_ulong,
                                     ctypes.POINTER(ctypes.c_double)]
    dll.usemem_cached_ns_per_word.restype = ctypes.c_double
    dll.usemem_cached_ns_per_word.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_long]
    dll.usemem_set.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_double]
    return dll


def available() -> bool:
    """Whether :func:`lib` loads here (a working C compiler built native/usemem.c)."""
    try:
        lib()
    except NoCompiler:
        return False
    return True


def wis_lib() -> ctypes.CDLL:
    """native/wis.c (will-it-scale's malloc1 loop) loaded, or :class:`NoCompiler`."""
    dll = _load(WIS_SOURCE, "wis.so", WIS_FLAGS, "malloc1's loop")
    dll.wis_malloc1.restype = ctypes.c_long
    dll.wis_malloc1.argtypes = [ctypes.c_ulong, ctypes.c_long]
    return dll


def _address(m: mmap.mmap) -> tuple[int, np.ndarray]:
    view = np.frombuffer(m, dtype=np.uint8)  # works for PROT_READ mappings too; the caller drops it
    return int(view.ctypes.data), view


def rw_once(m: mmap.mmap, read: bool, deadline: float = 0.0, random_seed: int | None = None) -> int:
    """usemem.c ``do_rw_once`` over all of ``m``: every word in order (or, with ``random_seed``,
    ``--random``: as many words at random indices); stops at the first 64 Ki-word check past
    ``deadline`` (CLOCK_MONOTONIC seconds, ``time.perf_counter``'s clock; 0 = none). Bytes accessed."""
    dll = lib()
    dll.usemem_set(0 if random_seed is None else 1, random_seed or 0, deadline)
    addr, view = _address(m)
    try:
        return int(dll.usemem_rw_once(addr, len(m), int(read)))
    finally:
        del view


BLOCK_BYTES = 64 << 20  # calibrate's fault pass (microbench.fault_4k_ns / fault_thp_ns: 64 MiB); session 13


def rw_blocks(m: mmap.mmap, read: bool, deadline: float = 0.0, block: int = BLOCK_BYTES) -> tuple[int, float]:
    """:func:`rw_once` (sequential) in blocks of ``block`` bytes (the whole mapping if it is smaller), each
    timed (``usemem_rw_blocks`` in native/usemem.c): bytes accessed and the fastest whole block's rate in
    bytes per wall second (0.0 if none finished)."""
    dll = lib()
    dll.usemem_set(0, 0, deadline)
    addr, view = _address(m)
    blk = min(block, len(m))
    best = ctypes.c_double(0.0)
    try:
        done = int(dll.usemem_rw_blocks(addr, len(m), int(read), blk, ctypes.byref(best)))
    finally:
        del view
    return done, blk / best.value if best.value > 0 else 0.0


def cached_ns_per_word(read: bool = False, nbytes: int = 16 << 10, reps: int = 20000, random: bool = False) -> float:
    """ns per word of the same loop over ``nbytes`` that stay in L1d (this thread's CPU time);
    ``random``: usemem --random's loop (an ``lrand48_r`` draw per word)."""
    dll = lib()
    dll.usemem_set(int(random), 1, 0.0)
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    addr, view = _address(m)
    try:
        return float(dll.usemem_cached_ns_per_word(addr, nbytes, int(read), reps))
    finally:
        del view
        m.close()
