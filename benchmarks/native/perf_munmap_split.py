"""Split a ``perf record -g`` profile of ``shmem_munmap.c``'s loop into the munmap's kernel functions.

Reads ``perf script`` text on stdin. Keeps the samples whose call chain passes through ``__vm_munmap``
(the munmap syscall), and prints for each the leaf function's share of those samples, then the samples
grouped by the components of ``zap_pte_range``'s work (session 12, docs/fault-front-half.md). A group is
decided by the innermost frame that names one, so ``native_flush_tlb_*`` under ``tlb_flush_mmu_tlbonly``
counts as the TLB flush, and ``_raw_spin_lock`` under ``lru_add_drain`` as the LRU drain.

    perf record -g -e cpu-clock -o /tmp/smu.data -- /tmp/smu 1 loop 20 128
    perf script -i /tmp/smu.data | python3 benchmarks/native/perf_munmap_split.py [--total-ns-per-page X]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

# component -> function names (host kernel 6.18 and v6.6 spellings); the first group matched from the
# leaf outwards decides
GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("rmap (_mapcount atomic)", ("folio_remove_rmap_ptes", "__folio_remove_rmap", "page_remove_rmap",
                                 "folio_remove_rmap_pte", "tlb_flush_rmap_batch", "tlb_flush_rmaps")),
    ("lruvec / memcg stats", ("__lruvec_stat_mod_folio", "__mod_lruvec_state", "__mod_memcg_lruvec_state",
                              "__mod_node_page_state", "memcg_rstat_updated", "__mod_lruvec_page_state",
                              "css_rstat_updated", "cgroup_rstat_updated")),
    ("dirty / accessed", ("folio_mark_dirty", "noop_dirty_folio", "set_page_dirty", "folio_mark_accessed",
                          "mark_page_accessed", "folio_activate", "__folio_mark_dirty")),
    ("release (put refs)", ("folios_put_refs", "release_pages", "free_pages_and_swap_cache", "free_swap_cache",
                            "__page_cache_release", "tlb_batch_pages_flush", "__folio_put", "free_unref_folios",
                            "tlb_flush_mmu_free")),
    ("lru_add_drain", ("lru_add_drain", "lru_add_drain_cpu", "folio_batch_move_lru")),
    ("TLB flush", ("flush_tlb_mm_range", "native_flush_tlb_multi", "kvm_flush_tlb_multi", "flush_tlb_func",
                   "native_flush_tlb_local", "native_flush_tlb_one_user", "native_flush_tlb_global",
                   "tlb_flush_mmu_tlbonly", "flush_tlb_batched_pending", "invalidate_user_asid")),
    ("__tlb_remove_page (gather)", ("__tlb_remove_folio_pages_size", "__tlb_remove_page_size",
                                     "__tlb_remove_folio_pages", "tlb_next_batch")),
    ("page tables", ("free_pgtables", "free_pgd_range", "free_pte_range", "___pte_free_tlb", "pte_free_tlb",
                     "tlb_remove_table", "tlb_table_flush", "free_pages", "__free_pages", "pagetable_dtor")),
    ("PTE walk and clear", ("zap_pte_range", "zap_present_ptes", "zap_present_folio_ptes", "unmap_page_range",
                            "zap_pmd_range", "unmap_vmas", "unmap_single_vma", "__pte_offset_map_lock",
                            "__pte_offset_map", "vm_normal_page", "_raw_spin_lock", "_raw_spin_unlock")),
]


def parse(lines: list[str]) -> list[list[str]]:
    """perf script's samples as lists of function names, leaf first."""
    out: list[list[str]] = []
    cur: list[str] | None = None
    for ln in lines:
        if not ln.strip():
            if cur:
                out.append(cur)
            cur = None
            continue
        if not ln.startswith((" ", "\t")):
            cur = []
            continue
        m = re.match(r"\s+[0-9a-f]+\s+(\S+?)(\+0x[0-9a-f]+)?\s+\(", ln)
        if m is not None and cur is not None:
            cur.append(m.group(1))
    if cur:
        out.append(cur)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total-ns-per-page", type=float, default=0.0,
                    help="the munmap's measured ns per page, to turn shares into ns per page")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    samples = parse(sys.stdin.read().splitlines())
    mun = [s for s in samples if "__vm_munmap" in s or "__x64_sys_munmap" in s]
    print(f"{len(samples)} samples, {len(mun)} under munmap")
    if not mun:
        return
    leaf = Counter(s[0] for s in mun)
    scale = a.total_ns_per_page / len(mun) if a.total_ns_per_page else 0.0
    print("leaf function                                  share    ns/page")
    for f, c in leaf.most_common(a.top):
        print(f"  {f:44s} {100 * c / len(mun):6.2f}%  {c * scale:7.1f}")
    groups: Counter[str] = Counter()
    for s in mun:
        g = "other (syscall, VMA, mmu_notifier...)"
        for f in s:
            hit = next((name for name, fs in GROUPS if f in fs), None)
            if hit is not None:
                g = hit
                break
        groups[g] += 1
    print("component                                      share    ns/page")
    for g, c in groups.most_common():
        print(f"  {g:44s} {100 * c / len(mun):6.2f}%  {c * scale:7.1f}")


if __name__ == "__main__":
    main()
