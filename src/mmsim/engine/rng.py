"""Seeded random numbers with named substreams (Mesa-style ``Model(seed=...)``).

Each component asks for its own stream by name (``rng.stream("lock:mmap_lock")``)
so adding a draw in one component never shifts the numbers another sees.
Streams are derived from the run seed and the name with numpy's
``SeedSequence``; the name is hashed with BLAKE2 so the mapping is stable
across Python processes (``hash()`` of a str is salted per process).
"""

from __future__ import annotations

import hashlib

import numpy as np


class RngStreams:
    """Factory of independent, reproducible ``numpy.random.Generator`` streams."""

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.seed = seed
        self._streams: dict[str, np.random.Generator] = {}

    def stream(self, name: str) -> np.random.Generator:
        g = self._streams.get(name)
        if g is None:
            key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")
            g = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, key])))
            self._streams[name] = g
        return g
