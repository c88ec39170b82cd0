"""Locks with lock_stat-like statistics recorded inside them."""

from mmsim.locks.base import CacheLine, LockContext
from mmsim.locks.rwsem import AtomicCounter, Mutex, RwSem
from mmsim.locks.spinlock import Spinlock, SpinlockKind

__all__ = ["AtomicCounter", "CacheLine", "LockContext", "Mutex", "RwSem", "Spinlock", "SpinlockKind"]
