"""pmbench's option parsing as LKP gives it, and the ``normal_ih`` pattern's shape.

``normal_ih`` (pmbench pattern.c, ``normal_ih_alloc_pattern_fn`` /
``normal_ih_get_number``): for a set of ``size`` pages, ``n_user = size - 1``,
``k = (n_user + 5) / 12``, ``n = 12 k``, ``shift = (n_user - n) / 2``; a page is
``(sum of 12 draws uniform on 0..n-1) / 12 + shift``, drawn again when above
``n_user``. The sum of 12 U(0, 1) is Irwin-Hall with mean 6 and variance 1, so
the page has mean ~n/2 and standard deviation n/12 (= k).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def parse_mib(lo: int = 0) -> Any:
    """A size in MiB: an integer (MiB, pmbench's unit) or with a k/m/g suffix (LKP's ``13824M``, ``47G``)."""
    def f(v: str) -> int:
        t = str(v).strip().lower()
        mult = {"k": 1 / 1024, "m": 1, "g": 1024}.get(t[-1:], 0)
        num = t[:-1] if mult else t
        if not num.isdigit():
            raise ValueError
        x = int(num) * (mult or 1)
        if x != int(x) or int(x) < lo or int(x) > (1 << 22):
            raise ValueError
        return int(x)
    return f


def parse_binding(v: str) -> str:
    """LKP lib/numactl.sh ``__parse_node_binding``: ``none``, ``even`` or ``even%<node list>``."""
    t = str(v).strip()
    if t in ("none", "even"):
        return t
    if t.startswith("even%") and node_list(t[5:]):
        return t
    raise ValueError


def node_list(v: str) -> list[int]:
    """A node list as LKP's ``expand_cpu_list`` takes it: ``0-1,3``; [] if malformed."""
    out: list[int] = []
    for part in v.split(","):
        a, _, b = part.partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            return []
        lo, hi = int(a), int(b or a)
        if hi < lo or hi > 1023:
            return []
        out.extend(range(lo, hi + 1))
    return out


def parse_window(v: str) -> float:
    d = float(str(v))
    if d == -1:
        return -1.0
    if not 0 < d <= 3600:
        raise ValueError
    return d


def parse_window_start(v: str) -> float:
    d = float(str(v))
    if not (d >= 0 or d == -1):
        raise ValueError
    return d


def normal_ih_shape(size: int) -> tuple[int, int, int]:
    """pattern.c ``normal_ih_alloc_pattern_fn``: (n, stdev k, shift) for a set of ``size`` pages."""
    n_user = size - 1
    k = (n_user + 6 - 1) // 12
    n = 12 * k
    shift = int((n_user - n) / 2)  # C int division truncates toward zero
    return n, k, shift


def irwin_hall_cdf(x: np.ndarray, order: int = 12) -> np.ndarray:
    """CDF of the sum of ``order`` U(0, 1) (Irwin-Hall), by its closed form, folded at the mean."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, float(order))
    xf = np.minimum(x, order - x)
    out = np.zeros_like(xf)
    for k in range(order // 2 + 1):
        d = np.maximum(xf - k, 0.0)
        out += (-1) ** k * math.comb(order, k) * d ** order
    out /= math.factorial(order)
    return np.asarray(np.where(x <= order / 2, out, 1.0 - out), dtype=np.float64)


__all__ = ["irwin_hall_cdf", "node_list", "normal_ih_shape", "parse_binding", "parse_mib", "parse_window",
           "parse_window_start"]
