"""validate --suite paths (issue 19): the model's zone->lock sections under page_fault1, and the verdicts."""

from __future__ import annotations

from mmsim.mm.validate_paths import PUBLISHED, ZAP_PUBLISHED, ZAP_SOURCE, _row, format_paths, section_times, zap_cycles


def test_one_task_sections_on_tiny() -> None:
    """tiny at 1 GHz, one task on CPU 0 (zone 0's home). 2 MiB: 512 pages + a PMD and a PTE table
    come in 9 refills of 63, leaving 53 on the PCP; munmap frees the 512 pages and the PTE table:
    the PCP reaches high = 2 x 63 at the 73rd free, then every 63 frees: 7 drains of 63. A refill
    costs batch x the __rmqueue path (70 cycles) plus its lines by where CPU 0's caches still hold
    them (test_free_path.py derives those costs by hand): the struct pages of a never-touched
    block come from memory, 2 per vmemmap 4 KiB page before the streamer covers the rest.
    The averages are this model's values (regression pins: a change to the line model moves them).
    Since session 30 each of expand()'s split levels adds its 22 cycles (mm/costs.py "expand/level"):
    taking k pages one by one from a fresh order-10 block splits (free blocks left) + (k - 1) times, so
    567 pages (9 x 63; 457 left = 5 blocks) split 571 times, 765 pages (3 x 255; 259 left = 3 blocks) 767,
    on top of the sections' 50,774 and 67,662 ns before."""
    small = {"memsize": "2m", "loops": "1"}
    t63 = section_times("tiny", 63, small)
    assert t63["alloc_sections"] == 9 and t63["free_sections"] == 7
    assert t63["alloc"] == (50_774 + 571 * 22) / 9 / 1000 and t63["free"] == 7.671428571428572
    assert t63["alloc"] > 63 * 70 / 1000  # the lines cost on top of the path
    t255 = section_times("tiny", 255, small)
    assert t255["alloc_sections"] == 3 and t255["alloc"] == (67_662 + 767 * 22) / 3 / 1000


def test_rows_and_published_figures() -> None:
    assert PUBLISHED["icelake-6338-2s"][1][(63, "free")] == 2.21
    assert PUBLISHED["cascadelake-optane-2s"][1][(2047, "alloc")] == 71.14
    assert _row("m", "q", 1.3, 1.0)["ok"] is True
    assert _row("m", "q", 1.31, 1.0)["ok"] is False
    assert _row("m", "q", 0.7, 1.0)["ok"] is True and _row("m", "q", 0.69, 1.0)["ok"] is False
    assert _row("m", "q", 5.0, None)["ok"] is None
    assert "level 2" in str(format_paths([_row("m", "q", 1.0, 1.0)])[0].title)


def test_shared_file_zap_cycles_on_tiny() -> None:
    """Session 12 (issue 22): the fourth munmap of a populated 4 MiB MAP_SHARED tmpfs mapping on tiny (1 GHz,
    one task: no IPIs), per page: zap_pte 120 + zap_pte_range/file 200 cycles, do_munmap's 8,216 cycles
    over 1,024 pages, the unlink of the file VMA (200 cycles), and three tables' full local flushes plus
    tlb_finish_mmu's INVLPG flush (3 x 300 + 779 cycles), which the cycles/page row leaves out, and the three
    PTE tables' memcg uncharges (100 cycles each: v6.6 charges page tables, 3e79ec7). No folio work beyond
    that: the folios are active and referenced by then (mm/zap.py)."""
    z = zap_cycles("tiny", 4 << 20)
    assert z["ns_per_page"] == {"zap_pte_range [file folio]": 200.0, "unmap_page_range": 120.0,
                                "do_munmap": 8216 / 1024, "flush_tlb_mm_range": (3 * 300 + 779) / 1024,
                                "unlink_file_vma": 200 / 1024, "__memcg_kmem_uncharge_page": 3 * 100 / 1024}
    assert z["cycles_per_page"] == 320 + (8216 + 200 + 300) / 1024


def test_zap_reference_is_the_robot_profile() -> None:
    # (4.58 - 0.34)% of perf-stat's 4.482e10 cycles/s over 7,336,336 ops/s
    assert round(ZAP_PUBLISHED["skylake-8170-2s"], 1) == 259.0
    assert _row("m", "q", 1.0, 1.0, source=ZAP_SOURCE)["source"].startswith("robot report 202311151610")
