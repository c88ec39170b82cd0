"""The host's per-CPU pageset sizes as validate's host policies (docs/validation.md, session 14)."""

from __future__ import annotations

from mmsim.kernels import resolve
from mmsim.machine import get_machine
from mmsim.native import sysinfo

# /proc/zoneinfo of this VM (6.18), cut to what the parser reads: DMA, DMA32 and Normal with their first CPU
ZONEINFO = """Node 0, zone      DMA
  pages free     3840
        managed  3840
  pagesets
    cpu: 0
              count:    0
              high:     0
              batch:    1
              high_min: 24
              high_max: 240
  vm stats threshold: 6
Node 0, zone    DMA32
  pages free     700000
        managed  772798
  pagesets
    cpu: 0
              count:    0
              high:     5010
              batch:    63
              high_min: 5010
              high_max: 48299
    cpu: 1
              count:    0
              high:     0
              batch:    63
              high_min: 5010
              high_max: 48299
  vm stats threshold: 24
Node 0, zone   Normal
  pages free     800000
        managed  851968
  pagesets
    cpu: 0
              count:    5283
              high:     5523
              batch:    63
              high_min: 5523
              high_max: 53248
  vm stats threshold: 24
Node 0, zone  Movable
  pages free     0
        managed  0
"""


def test_pcp_sizes_are_the_highest_managed_zones() -> None:
    assert sysinfo.pcp_sizes(ZONEINFO) == {"pcp_batch": 63, "pcp_high_min": 5523, "pcp_high_max": 53248}
    assert sysinfo.pcp_sizes(ZONEINFO.replace("high_min", "x_min")) == {}  # before v6.7: nothing to say
    assert sysinfo.pcp_sizes("") == {}


def test_the_allocator_takes_the_hosts_sizes() -> None:
    from mmsim.mm.system import System

    k = resolve("v6.15", overrides={"pcp_batch": "63", "pcp_high_min": "5523", "pcp_high_max": "53248"})
    z = System(get_machine("tiny"), k, seed=0).page_alloc.zones[0]
    assert (z.batch, z.high, z.high_max) == (63, 5523, 53248)
    auto = System(get_machine("tiny"), resolve("v6.15"), seed=0).page_alloc.zones[0]
    assert auto.high != 5523  # without the host's values: zone_highsize of tiny's zone
