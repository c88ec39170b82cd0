"""mmsim: a simulator of Linux kernel memory-management performance on many-core NUMA machines."""

from __future__ import annotations

__version__ = "0.1.0"
