"""The per-CPU pageset (``struct per_cpu_pages``) and its sizing rules
(mm/page_alloc.c), v5.13 … v6.15, each rule behind the policy of the patch
that introduced it:

* ``free_factor`` (3b12e7e97938, v5.14): a drain frees ``batch <<
  free_factor`` pages, doubling per free-only drain; an allocation halves it.
  ``pcp_batch_scale_max`` (52166607ecc9) stops it at
  ``CONFIG_PCP_BATCH_SCALE_MAX`` (5).
* free_high (f26b3fa04611, v5.18; ca71fe1ad922 and 362d37a106dd, v6.7):
  drain the whole PCP on a high-order free, see :meth:`PcpRules.commit`.
* ``alloc_factor`` (c0a242394cb9, v6.7): ``nr_pcp_alloc`` doubles the
  refill per refill without a free, up to ``high - count - batch``; every
  free halves it.
* ``high_min`` / ``high_max`` (90b41691b988) and the auto-tuning of
  ``high`` (51a755c56dc0): each refill raises ``high`` by its batch, a
  drain raises it to hold what is freed, a free_high drain lowers it;
  ``ZONE_BELOW_HIGH`` (57c0419c5f0e) stops the raise and lowers ``high``
  on free while the zone is under its high watermark.
* ``free_count`` (6ccdcb6d3a74): pages freed since the last allocations
  (halved per allocation) replace ``free_factor``; free_high needs
  ``free_count >= batch``, or ``batch + high_min / 2`` from c544a952ba61
  (v6.15).

The patch texts are quoted in docs/pcp-series.md with their store ids.
``decay_pcp_high`` (vmstat_update, every second) and ``ZONE_RECLAIM_ACTIVE``
are not modelled (no run here lasts a second or reclaims).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

PAGE_ALLOC_COSTLY_ORDER = 3

# per_cpu_pages.flags
PCPF_PREV_FREE_HIGH_ORDER = 0x01
PCPF_FREE_HIGH_BATCH = 0x02

NO_LIMIT = 1 << 30  # no CONFIG_PCP_BATCH_SCALE_MAX (before 52166607ecc9)


class Pcp:
    """``struct per_cpu_pages`` of one CPU and zone. A list's head is its right end."""

    __slots__ = ("lists", "count", "high", "high_min", "high_max", "batch", "free_factor", "alloc_factor",
                 "free_count", "flags")

    def __init__(self, nlists: int, high: int, batch: int, flags: int, high_max: int = 0) -> None:
        self.lists: list[deque[tuple[int, int]]] = [deque() for _ in range(nlists)]
        self.count = 0
        self.high = self.high_min = high
        self.high_max = max(high, high_max)
        self.batch = batch
        self.free_factor = 0
        self.alloc_factor = 0
        self.free_count = 0
        self.flags = flags


class PcpRules:
    """The sizing rules of one kernel's policies (see the module docstring)."""

    def __init__(self, pol: Callable[[str], str]) -> None:
        self.free_factor_on = pol("pcp_free_factor") == "on"
        self.free_high_rule = pol("pcp_free_high")
        sm = pol("pcp_batch_scale_max")
        self.scale_max = NO_LIMIT if sm == "off" else int(sm)
        self.alloc_factor_on = pol("pcp_alloc_factor") == "on"
        self.tuning = pol("pcp_high_tuning")  # off | framework | auto
        self.auto = self.tuning == "auto"
        self.below_high_on = pol("pcp_below_high") == "on"
        self.free_count_on = pol("pcp_free_count") == "on"
        self.threshold_half_min = pol("pcp_free_high_threshold") == "batch+high_min/2"  # c544a952ba61

    # -- free side -------------------------------------------------------------------
    def commit(self, pcp: Pcp, z: Any, order: int) -> tuple[int, bool]:
        """``free_unref_page_commit`` after the list add: ``(pages to drain now, free_high)``."""
        if self.alloc_factor_on:
            pcp.alloc_factor >>= 1
        batch = pcp.batch
        free_high = False
        rule = self.free_high_rule
        if rule != "off":
            if 0 < order <= PAGE_ALLOC_COSTLY_ORDER:
                free_high = pcp.free_count >= batch + (pcp.high_min >> 1 if self.threshold_half_min else 0) \
                    if self.free_count_on else pcp.free_factor > 0
                if rule == "consecutive":
                    free_high = free_high and bool(pcp.flags & PCPF_PREV_FREE_HIGH_ORDER)
                    pcp.flags |= PCPF_PREV_FREE_HIGH_ORDER
                if free_high and pcp.flags & PCPF_FREE_HIGH_BATCH:
                    free_high = pcp.count >= batch
            elif pcp.flags & PCPF_PREV_FREE_HIGH_ORDER:
                pcp.flags &= ~PCPF_PREV_FREE_HIGH_ORDER
        if self.free_count_on and pcp.free_count < (batch << self.scale_max):
            pcp.free_count += 1 << order
        high = self.nr_pcp_high(pcp, z, batch, free_high)
        if pcp.count < high:
            return 0, False
        return self.nr_pcp_free(pcp, batch, high, free_high), free_high

    def nr_pcp_high(self, pcp: Pcp, z: Any, batch: int, free_high: bool) -> int:
        """``nr_pcp_high`` (no reclaim active)."""
        if not self.auto:
            return 0 if free_high else pcp.high
        lo, hi = pcp.high_min, pcp.high_max
        high = pcp.high = min(max(pcp.high, lo), hi)
        if not high:
            return 0
        if free_high:
            pcp.high = max(high - (batch << self.scale_max), lo)
            return 0
        if lo == hi:
            return high
        freed = max(pcp.free_count, batch) if self.free_count_on else batch << pcp.free_factor
        if self.below_high_on and z.below_high:
            pcp.high = max(high - freed, lo)
            high = max(pcp.count, lo)
        elif pcp.count >= high:
            need = (pcp.free_count if self.free_count_on else batch << pcp.free_factor) + batch
            if pcp.high < need:
                pcp.high = min(max(need, lo), hi)
        return high

    def nr_pcp_free(self, pcp: Pcp, batch: int, high: int, free_high: bool) -> int:
        """``nr_pcp_free``: pages one drain frees."""
        if free_high:
            return min(pcp.count, batch << self.scale_max) if self.auto else pcp.count
        if not (self.free_factor_on or self.free_count_on):
            return batch  # before 3b12e7e97938: free_hot_cold_page frees pcp->batch
        if high < batch:
            return 1
        lo, hi = batch, high - batch
        if self.free_count_on:
            return min(max(pcp.free_count, lo), hi)
        b = batch << pcp.free_factor
        if (b <= hi if self.auto else b < hi) and pcp.free_factor < self.scale_max:
            pcp.free_factor += 1
        return min(max(b, lo), hi)

    # -- allocation side -------------------------------------------------------------
    def on_alloc(self, pcp: Pcp) -> None:
        """``rmqueue_pcplist``: an allocation halves ``free_factor`` / ``free_count``."""
        if self.free_factor_on:
            pcp.free_factor >>= 1
        if self.free_count_on:
            pcp.free_count >>= 1

    def nr_pcp_alloc(self, pcp: Pcp, z: Any, order: int) -> int:
        """``nr_pcp_alloc`` (c0a242394cb9, 51a755c56dc0): blocks one refill takes."""
        base = pcp.batch
        high = pcp.high
        if self.auto:
            high = pcp.high = min(max(high, pcp.high_min), pcp.high_max)
        if high < base:
            return 1
        batch = base << pcp.alloc_factor if self.alloc_factor_on and not order else base
        if self.auto and pcp.high_min != pcp.high_max and not (self.below_high_on and z.below_high):
            high = pcp.high = min(high + batch, pcp.high_max)
        if self.alloc_factor_on and not order:
            most = max(high - pcp.count - base, base)
            if batch <= most and pcp.alloc_factor < self.scale_max:
                pcp.alloc_factor += 1
            batch = min(batch, most)
        if batch > 1:
            batch = max(batch >> order, 2)
        return batch
