"""Path lengths of kernel code between the modelled locks and memory traffic.

These are the *instructions* of a kernel function body, converted to time
with the machine clock: they do not depend on the machine and are the same
for both arms of every experiment. They are small next to lock hand-offs and
page clearing, and no result hinges on them. Numbers are estimates from
the length of the C code paths named (instruction counts of the hot path
with an IPC of ~1), marked as such; they are the first thing ``mmsim
calibrate`` refines against native measurement.
"""

from __future__ import annotations

# name -> (cycles, instructions); estimate: hot-path length of the function in the kernel source named.
PATH_CYCLES: dict[str, tuple[int, int]] = {
    # mm/memory.c handle_mm_fault + __handle_mm_fault walk (pgd/pud/pmd offset, vma checks). estimate
    "handle_mm_fault": (300, 300),
    # arch/x86/mm/fault.c __do_page_fault: find_vma + access checks. estimate
    "__do_page_fault": (200, 200),
    # mm/memory.c do_anonymous_page minus alloc/clear/lock: mk_pte, set_pte_at, rmap, lru add. estimate
    "do_anonymous_page": (400, 400),
    # mm/memory.c (v6.7) do_anonymous_page's read branch ("Use the zero-page for reads"), instructions
    # counted from the code: the VM_SHARED and pte_alloc checks at entry (~15), pfn_pte(my_zero_pfn) +
    # pte_mkspecial (~5), pte_offset_map_lock without the lock (pmd read, pte_offset_map: ~15),
    # vmf_pte_changed (~5), check_stable_address_space and userfaultfd_missing (~6), the setpte tail:
    # vmf_orig_pte_uffd_wp, set_pte_at, update_mmu_cache (a no-op on x86), pte_unmap_unlock's rcu part
    # (~10), call/return (~20): ~80 at an IPC of ~1. No folio, rmap, memcg or LRU. estimate (plausible
    # 50-150). Issue 15: the read fault was charged the write branch's 400.
    "do_anonymous_page/zero": (80, 80),
    # mm/huge_memory.c __do_huge_pmd_anonymous_page under the PMD lock: mk_huge_pmd, set_pmd_at,
    # page_add_new_anon_rmap, pgtable deposit. estimate
    "__do_huge_pmd_anonymous_page": (300, 300),
    # mm/page_alloc.c (v6.6) rmqueue_bulk's loop body for one block, under zone->lock, instructions
    # counted from the code: __rmqueue's CMA check (~8), __rmqueue_smallest's get_page_from_free_area
    # (~4) and del_page_from_free_list (page_reported, list_del, __ClearPageBuddy, set_page_private,
    # nr_free--: ~15), expand with no split (~3), set_pcppage_migratetype, list_add_tail onto the PCP
    # list and the is_migrate_cma test (~12), loop and call overhead (~25): ~70 at an IPC of ~1.
    # estimate (plausible 40-100); split levels and struct page lines are charged apart. Was 150
    # (a rough estimate that included the lines) before issue 19 charged the lines one by one.
    "__rmqueue": (70, 70),
    # mm/page_alloc.c buffered_rmqueue / rmqueue_pcplist fast path, no zone lock. estimate
    "rmqueue_pcplist": (60, 60),
    # mm/page_alloc.c free_unref_page: free_pages_prepare checks + pcp list add, no zone lock. estimate
    "free_unref_page": (80, 80),
    # mm/page_alloc.c (v6.6) free_pcppages_bulk's loop body + __free_one_page for one block with no
    # merge, instructions counted from the code: list_last_entry, get_pcppage_migratetype, list_del and
    # the counts (~16); __mod_zone_freepage_state -> __mod_zone_page_state (~20); compaction_capture,
    # find_buddy_page_pfn + page_is_buddy failing (~15); set_buddy_order, buddy_merge_likely,
    # add_to_free_list[_tail], page_reporting_notify_free (~30): ~80 at an IPC of ~1. estimate
    # (plausible 50-110; was 60 before issue 19's count); struct page lines are charged apart.
    "__free_one_page": (80, 80),
    # one split level of expand() (v6.6 mm/page_alloc.c), instructions counted from the code: the loop's
    # high--, size >>= 1, compare and branch (~4), set_page_guard behind its static key (~2),
    # add_to_free_list: the free_area address (~4), list_add on the type's list (~6), nr_free++ (~2);
    # set_buddy_order: set_page_private and __SetPageBuddy (~4): ~22 at an IPC of ~1. estimate (plausible
    # 15-35); its lines are charged apart (mm/buddy.py). docs/validation-paths.md, session 30: until then a
    # split level cost no instructions while a merge level cost 40.
    "expand/level": (22, 22),
    # one merge level of __free_one_page (v6.6): find_buddy_page_pfn + page_is_buddy (~15), the
    # pageblock_order test, page_is_guard, del_page_from_free_list (~15), combined_pfn (~5): ~40. estimate
    "__free_one_page/merge": (40, 40),
    # mm/mmap.c do_mmap_pgoff + get_unmapped_area + vma_link (v6.x: mmap_region, vm_area_alloc, the maple
    # tree's mas_preallocate/vma_iter_store, vm_stat_account, perf_event_mmap). Native measurement on the
    # calibration host (2-vCPU AMD EPYC VM, kernel 6.18, 2026-12-01): mmap of 128 MiB + 4 KiB anonymous,
    # 1,306 ns of thread CPU time (min of 7 x 20,000, the timer's own 477 ns removed) less the syscall
    # entry/exit (getppid: 119 ns) = 1,187 ns = 3,080 cycles at 2.596 GHz; other machines: plausible
    # 2,000-5,000 (was an estimate of 2,000). Instructions: taken equal to the cycles (IPC ~1).
    "do_mmap_pgoff": (3080, 3080),
    # kernel/fork.c clone → copy_process for a CLONE_VM thread + wake_up_new_task, as the parent pays it.
    # Native measurement on the calibration host (2-vCPU AMD EPYC VM, kernel 6.18, 2026-12-03,
    # benchmarks/native/pthread_create_parts.c): pthread_create with a caller-given stack whose top page is
    # already mapped, the parent's thread CPU time, 6,773 ns (min of 5 x 256, timer removed) less the
    # syscall entry/exit (getppid: 130 ns) = 6,643 ns = 17,245 cycles at 2.596 GHz (glibc's own few
    # hundred instructions included); other machines: plausible 12,000-30,000 (was an estimate of 20,000).
    "copy_process": (17245, 17245),
    # kernel/fork.c fork() of a small process (a few MiB mapped: its binary, libc, stacks) as the parent pays
    # it: copy_process with dup_mm/dup_mmap and its page-table copy, the child's wake-up. Native measurement
    # as copy_process (benchmarks/native/pthread_create_parts.c "fork"): minimum of 64 forks per run, five
    # runs 45,305-57,339 ns, median 48,542 less the syscall's 120 = 48,422 ns = 125,700 cycles at 2.596 GHz.
    # A benchmark's own populated mappings are copied apart (memory.copy_page_range). Other machines:
    # plausible 60,000-300,000. Until session 19 forks were charged the CLONE_VM thread estimate (20,000).
    "copy_process/fork": (125700, 125700),
    # mm/mprotect.c sys_mprotect → mprotect_fixup → split_vma of an untouched VMA's lowest page to
    # PROT_NONE (glibc's thread-stack guard). Native measurement as copy_process: 1,143 ns less the
    # syscall's 130 ns = 1,013 ns = 2,630 cycles; other machines: plausible 2,000-5,000, as do_mmap_pgoff.
    "mprotect_fixup": (2630, 2630),
    # mm/mempolicy.c sys_get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR) of one populated page, the whole call
    # less the code under the page-table lock (below): syscall entry/exit, do_get_mempolicy (mmap_sem,
    # find_vma, the VMA's policy), lookup_node's get_user_pages setup, page_to_nid, put_page, copy_to_user.
    # Native measurement on the calibration host (2-vCPU AMD EPYC VM, kernel 6.18, 2026-12-03,
    # benchmarks/native/get_mempolicy_cost.c): one call per 4 KiB address of a populated 64 MiB buffer,
    # thread CPU time per call, minimum of 7 passes, three runs: THP-mapped 401-407 ns, 4 KiB-mapped
    # 437-541 ns (min 437) = 1,044 / 1,134 cycles at 2.596 GHz, the syscall's entry/exit included; less the
    # locked parts below. Other machines and kernels: plausible 700-2,000 cycles.
    "get_mempolicy": (1044 - 120, 1044 - 60),
    "get_mempolicy/pte": (1134 - 100, 1134 - 50),
    # mm/huge_memory.c (v3.12) follow_trans_huge_pmd under the PMD lock, with FOLL_GET | FOLL_TOUCH: the
    # pmd_trans_huge / pmd_trans_splitting re-checks, pmd_mkyoung(pmd_mkdirty()) with no change (the
    # page was written), the tail page, get_page_foll (atomic_inc of the head's _count and the tail's
    # _mapcount, both this thread's own lines): ~60 instructions and two uncontended locked RMWs (~30 cycles
    # each). estimate (plausible 80-200 cycles)
    "follow_trans_huge_pmd": (120, 60),
    # mm/memory.c (v3.12) follow_page_mask's PTE part under the split PTE lock: pte_present, vm_normal_page,
    # get_page_foll (one locked RMW on the page's _count), FOLL_TOUCH's mark_page_accessed test: ~50
    # instructions. estimate (plausible 60-150 cycles)
    "follow_page_pte": (100, 50),
    # mm/hugetlb.c hugetlb_fault + hugetlb_no_page bookkeeping (page cache / rmap). estimate
    "hugetlb_no_page": (600, 600),
    # mm/hugetlb.c dequeue_huge_page_node under hugetlb_lock. estimate
    "dequeue_huge_page_node": (150, 150),
    # net/socket.c + net/unix/af_unix.c: write() entry/exit, sock_write_iter, unix_stream_sendmsg
    # set-up (scm_send, peer lookup). estimate
    "unix_stream_sendmsg": (700, 700),
    # net/core/skbuff.c alloc_skb_with_frags without its page allocations and without the two slab
    # allocations (mm/slub.c, below): kmalloc_reserve's size rounding, __alloc_skb init,
    # skb_fill_page_desc; sock_alloc_send_pskb wmem check. estimate
    "alloc_skb_with_frags": (500, 500),
    # net/unix/af_unix.c: skb_queue_tail under unix_state_lock(other), maybe_add_creds, scm_stat_add. estimate
    "skb_queue_tail": (150, 150),
    # net/core/sock.c sock_def_readable -> __wake_up_sync_key -> try_to_wake_up of the sleeping reader. estimate
    "sock_def_readable": (800, 800),
    # net/socket.c + net/unix/af_unix.c: read() entry/exit, unix_stream_recvmsg, u->iolock. estimate
    "unix_stream_recvmsg": (700, 700),
    # net/unix/af_unix.c unix_stream_read_generic per skb: skb_peek, unix_stream_read_actor and
    # skb_copy_datagram_iter set-up, UNIXCB bookkeeping. estimate
    "unix_stream_read_actor": (300, 300),
    # net/core/skbuff.c consume_skb -> skb_release_all (sock_wfree destructor, skb_release_data per
    # frag put_page), skb_free_head and kfree_skbmem, without the page frees and without the two slab
    # frees (mm/slub.c, below). estimate
    "consume_skb": (600, 600),
    # mm/slub.c (v6.6) slab_alloc_node fast path: tid read, this_cpu_cmpxchg_double of the freelist,
    # prefetch, slab_pre/post_alloc_hook (memcg, kfence, init checks). estimate
    "slab_alloc": (50, 50),
    # mm/slub.c do_slab_free fast path: slab_free_hook, tid, this_cpu_cmpxchg_double. estimate
    "slab_free": (50, 50),
    # mm/slub.c ___slab_alloc without the node list and new_slab: local_lock, node/pfmemalloc checks,
    # get_freelist's cmpxchg_double loop, load_freelist. estimate
    "___slab_alloc": (150, 150),
    # mm/slub.c __slab_free: the cmpxchg_double loop on the slab's freelist/counters, frozen and
    # list decisions, stat. estimate
    "__slab_free": (100, 100),
    # mm/slub.c put_cpu_partial: local_lock, push on c->partial, slabs count. estimate
    "put_cpu_partial": (40, 40),
    # mm/slub.c get_partial_node per slab taken under n->list_lock: pfmemalloc_match, acquire_slab's
    # cmpxchg_double, remove_partial, put_cpu_partial(drain 0) or stat. estimate
    "get_partial_node": (80, 80),
    # mm/slub.c __unfreeze_partials per slab under n->list_lock: cmpxchg_double unfreeze, add_partial. estimate
    "__unfreeze_partials": (80, 80),
    # mm/slub.c allocate_slab without the page allocation and the per-object part: folio slab flags,
    # account_slab (memcg/vmstat), slab fields, inc_slabs_node, shuffle set-up. estimate
    "allocate_slab": (300, 300),
    # mm/slub.c allocate_slab per object: setup_object + set_freepointer (the line write is charged
    # apart, by its latency). estimate
    "allocate_slab/object": (20, 20),
    # mm/slub.c discard_slab -> free_slab -> __free_slab without __free_pages: dec_slabs_node,
    # folio flags, unaccount_slab, mm_account_reclaimed_pages. estimate
    "discard_slab": (150, 150),
    # net/unix/af_unix.c unix_write_space -> wake_up_interruptible_sync_poll of the writer. estimate
    "unix_write_space": (800, 800),
    # fs/pipe.c pipe_write/pipe_read of a few bytes (lmbench's control pipe), wake-up included. estimate
    "pipe_write": (1500, 1500),
    # mm/memory.c zap_pte_range per present PTE: the walk, ptep_get_and_clear_full, tlb_remove_tlb_entry,
    # vm_normal_page (what a zero-page PTE costs; a page-cache folio's work is "zap_pte_range/file"). Native
    # measurement on the calibration host (2-vCPU AMD EPYC KVM guest, kernel 6.18, 2026-12-02 12:12-12:15 UTC,
    # benchmarks/native/shmem_munmap.c, thread CPU time, min of 15 rounds, 4 runs): munmap of a MAP_PRIVATE
    # anonymous mapping populated with the zero page, 4-128 MiB: 42.9-46.3 ns per page = 111-120 cycles at
    # 2.596 GHz (was an estimate of 120). The Skylake robot's v6.6 profile (202311151610.43a1e565, patched
    # arm) has zap_pte_range's self time at 1.39% of 6,109 cycles per op = 85 cycles (docs/fault-front-half.md,
    # session 12). Other machines: plausible 80-150 cycles.
    "zap_pte": (120, 120),
    # mm/mmap.c do_munmap/unmap_region/free_pgtables fixed part (v6.x: do_vmi_align_munmap's maple tree
    # detach and mas_preallocate, the mmu_gather set-up and tlb_finish_mmu, free_pgd_range's walk,
    # remove_vma -> vm_area_free). Native measurement on the calibration host, as do_mmap_pgoff: munmap of
    # an untouched 128 MiB + 4 KiB mapping 3,284 ns less the syscall 119 ns = 3,165 ns = 8,216 cycles;
    # page-table and page freeing are charged apart. Other machines: plausible 3,000-9,000 (was an
    # estimate of 3,000).
    "do_munmap": (8216, 8216),
    # mm/rmap.c __anon_vma_prepare (v6.7), once per new anonymous VMA on its first write fault:
    # anon_vma_chain_alloc and anon_vma_alloc (two kmem_cache_alloc, the slab fast path each ~50),
    # find_mergeable_anon_vma's neighbour checks, init_rwsem, anon_vma_lock_write, mm->page_table_lock,
    # anon_vma_chain_link (anon_vma_interval_tree_insert), unlocks. estimate (plausible 400-1,200)
    "anon_vma_prepare": (700, 600),
    # mm/rmap.c unlink_anon_vmas (v6.7) from free_pgtables for a VMA with an anon_vma: anon_vma_lock_write,
    # anon_vma_interval_tree_remove, anon_vma_chain_free (kmem_cache_free), put_anon_vma -> __put_anon_vma
    # -> anon_vma_free (kmem_cache_free). estimate (plausible 300-1,000)
    "unlink_anon_vmas": (500, 450),
    # mm/huge_memory.c copy_huge_pmd minus its atomics: two PMD locks (uncontended at fork),
    # pmdp_set_wrprotect, set_pmd_at, deposit, add_mm_counter. estimate
    "copy_huge_pmd": (400, 400),
    # mm/memory.c copy_one_pte for a present anonymous PTE: get_page, page_dup_rmap (uncontended
    # atomics on a line the forking CPU owns), ptep_set_wrprotect, set_pte_at. estimate
    "copy_one_pte": (60, 60),
    # mm/huge_memory.c do_huge_pmd_wp_page under the PMD lock minus its atomics: mk_huge_pmd,
    # pmdp_huge_clear_flush_notify (local TLB flush, single-threaded mm), page_add_new_anon_rmap,
    # memcg commit, lru add, set_pmd_at. estimate
    "do_huge_pmd_wp_page": (1500, 1200),
    # mm/vmstat.c refresh_cpu_vm_stats: fold per-cpu diffs of every zone/node item. estimate
    "refresh_cpu_vm_stats": (4000, 4000),
    # --- issue 22: the per-VMA lock, shmem and the file fault paths (v6.6/v6.7 code) ---
    # mm/memory.c lock_vma_under_rcu: rcu_read_lock, mas_walk down a 1-2 level maple tree of a few VMAs,
    # vma_start_read's two vm_lock_seq / mm_lock_seq compares (the trylock atomic is charged apart), the
    # anon_vma, userfaultfd and range checks. estimate
    "lock_vma_under_rcu": (150, 120),
    # mm/filemap.c filemap_get_entry: xas_load down the i_pages xarray (2-3 levels for 2^15..2^18 pages),
    # xa_is_value check, the folio_try_get_rcu recheck (the refcount atomic is charged apart). estimate
    "filemap_get_entry": (80, 70),
    # mm/shmem.c shmem_fault + shmem_get_folio_gfp bookkeeping around the lookup: the i_private
    # (fallocate) check, sgp/huge checks, vmf_error mapping. estimate
    "shmem_fault": (150, 150),
    # mm/shmem.c shmem_alloc_folio without the page allocation: shmem_get_pgoff_policy, vma_alloc_folio
    # set-up, __folio_set_locked/__folio_set_swapbacked, shmem_inode_acct_blocks' percpu counter. estimate
    "shmem_alloc_folio": (200, 180),
    # mm/shmem.c shmem_add_to_page_cache under the xa_lock: xas_store, mapping->nrpages++,
    # __lruvec_stat_mod_folio(NR_FILE_PAGES, NR_SHMEM). estimate
    "shmem_add_to_page_cache": (150, 150),
    # mm/shmem.c shmem_recalc_inode under info->lock: alloced/swapped arithmetic. estimate
    "shmem_recalc_inode": (40, 40),
    # mm/memory.c finish_fault (v6.6): pte_offset_map_lock, set_pte_range (mk_pte, set_pte_at,
    # add_mm_counter, update_mmu_cache_range); the rmap atomic is charged apart. estimate
    "finish_fault": (250, 220),
    # mm/memory.c do_fault_around + mm/filemap.c filemap_map_pages set-up: window bounds,
    # filemap_map_pmd, rcu_read_lock, xas set-up, the PTE lock. estimate
    "do_fault_around": (200, 180),
    # mm/filemap.c next_uptodate_folio + filemap_map_folio_range per folio: xas_next_entry, the
    # uptodate/mapping/index checks, set_pte_range, the f_ra.mmap_miss update; its atomics on the
    # folio (refcount, PG_locked, _mapcount, refcount) are charged apart. estimate
    "filemap_map_folio": (120, 110),
    # mm/memory.c fault_dirty_shared_page: folio_mark_dirty -> noop_dirty_folio (shmem), folio_unlock,
    # file_update_time's inode_needs_update_time compare (mapping_can_writeback is false: no
    # balance_dirty_pages). estimate
    "fault_dirty_shared_page": (150, 140),
    # fs/inode.c file_update_time when the coarse clock moved: __mnt_want_write_file,
    # inode_update_time -> generic_update_time, __mark_inode_dirty (tmpfs: no writeback). estimate
    "file_update_time": (400, 400),
    # kernel/sched/wait_bit.c / mm/filemap.c folio_wait_bit_common: add the exclusive wait entry to the
    # hashed wait queue, set PG_waiters; folio_wake_bit: walk the queue, wake_page_function takes the lock
    # for the first exclusive waiter, clear PG_waiters. Each under the queue's spinlock. estimate
    "folio_wait_queue": (150, 150),
    # mm/mmap.c __vma_link_file / unlink_file_vma: vma_interval_tree insert/remove under i_mmap_rwsem. estimate
    "vma_interval_tree": (200, 200),
    # --- issues 15/22, session 9: munmap of touched pages (mm/zap.py) ---
    # mm/memory.c zap_pte_range (v6.7) per pte_none slot of the zapped range: ptep_get, the pte_none test,
    # the loop increments. Native measurement on the calibration host (2-vCPU AMD EPYC KVM guest, kernel
    # 6.18, 2026-12-02, thread CPU time, min of 3,001): munmap of a 2 MiB-aligned 2 MiB anonymous mapping with
    # its first page written costs 0.8-1.0 us more over the untouched one than a 4 KiB mapping's does: 511
    # slots walked, 1.6-2.0 ns = 4.1-5.1 cycles at 2.596 GHz each. Other machines: plausible 2-8 cycles.
    "zap_pte_range/none": (5, 6),
    # mm/memory.c zap_pte_range (v6.7) per present PTE of a page-cache folio beyond what a zero-page PTE
    # costs (that is "zap_pte"): set_page_dirty (shmem noop_dirty_folio), delay_rmap, mark_page_accessed's flag
    # tests, page_remove_rmap (the _mapcount atomic, __lruvec_stat_mod_folio(NR_FILE_MAPPED): node and memcg
    # per-CPU stats), __tlb_remove_page, release_pages' folio_put_testzero. Native measurement on the
    # calibration host (kernel 6.18, 2026-12-02 12:12-12:15 UTC, benchmarks/native/shmem_munmap.c, thread CPU
    # time, min of 15 rounds, 4 MiB and 16 MiB mappings: struct pages in the L2): munmap of a MAP_SHARED memfd
    # mapping populated for write (MADV_POPULATE_WRITE: dirty, young PTEs) 120.0-123.1 ns per page, of the
    # zero-page one ("zap_pte") 43.3-46.3 ns, measured in the same runs: 76.0-78.4 ns in 6 of 7 pairs (one
    # 105.4) = 197-204 cycles at 2.596 GHz. perf (timer sampling, 4 MiB) splits the host's munmap: the PTE
    # walk and clear with the folio's first struct page touch 45%, memcg/lruvec stats 19%, rmap 16%,
    # release (folios_put_refs, free_swap_cache) 7%, folio_mark_dirty/accessed 6%, the mmu_gather 3%, TLB
    # flush 1%. The Skylake robot's v6.6 profile (patched arm of 202311151610.43a1e565) has zap_pte_range's
    # children less its self time and less flush_tlb_mm_range (the IPIs, charged apart) at 4.46 - 1.39 - 0.34
    # = 2.73% of its 6,109 cycles per op = 167 cycles for the same work. Session 9's
    # 300 (98-133 ns, measured at load 1.5-2.9, when the zero page cost 76-78 ns) was 1.5x the host's own
    # figure measured in a quiet moment. Other machines: plausible 150-350 cycles.
    "zap_pte_range/file": (200, 250),
    # mm/swap.c folio_mark_accessed on a folio not yet referenced: folio_set_referenced, an atomic set_bit on
    # its flags (the struct page line is held already). estimate (plausible 10-40)
    "folio_set_referenced": (20, 3),
    # arch/x86/mm/tlb.c flush_tlb_mm_range over more than tlb_single_page_flush_ceiling (33) pages, local
    # part: flush_tlb_func -> flush_tlb_local (a CR3 write or INVPCID of the ASID) and the bookkeeping; the
    # IPIs are charged apart. estimate (plausible 100-1,000 cycles)
    "flush_tlb_mm_range/full": (300, 100),
    # arch/x86/mm/tlb.c flush_tlb_mm_range over at most tlb_single_page_flush_ceiling (33) pages, local part:
    # inc_mm_tlb_gen, get_flush_tlb_info, flush_tlb_func -> flush_tlb_one_user (INVLPG per page). Native
    # measurement on the calibration host (guest kernel 6.18, perf timer sampling over 100,001 rounds of the
    # malloc1 pattern, session 9, docs/validation.md): 0.30 us per munmap that flushed 1 page = 779 cycles at
    # 2.596 GHz, INVLPG included; the per-page part is not separated, so 2-33 pages cost the same here.
    # Other machines: plausible 300-1,000 cycles.
    "flush_tlb_mm_range/local": (779, 150),
    # mm/mmu_gather.c tlb_remove_table (v6.7, CONFIG_MMU_GATHER_RCU_TABLE_FREE, policy pgtable_free=rcu): the
    # first table of an mmu_gather takes a batch page (__get_free_page(GFP_NOWAIT), charged by the allocator)
    # and starts it; this is the rest. Native measurement on the calibration host (same profile): 0.50 us in
    # tlb_remove_table of which 0.33 us __get_free_pages: 0.17 us = 441 cycles (the batch page's first line
    # written included). Other machines: plausible 100-600 cycles.
    "tlb_remove_table": (441, 60),
    # kernel/rcu/tree.c __call_rcu_common from tlb_table_flush -> tlb_remove_table_free. Native measurement on
    # the calibration host (same profile): 0.08 us = 208 cycles. Other machines: plausible 50-300 cycles.
    "call_rcu": (208, 80),
    # kernel/rcu/tree.c rcu_do_batch invoking tlb_remove_table_rcu -> __tlb_remove_table_free for one batch
    # (the RCU softirq's per-callback work; the page frees are charged by the allocator). estimate
    # (plausible 100-1,000 cycles; not in the host profile, which sampled the munmap only)
    "tlb_remove_table_rcu": (200, 100),
}


def path(name: str, freq_ghz: float) -> tuple[int, int]:
    """(ns, instructions) of the path ``name`` on a clock of ``freq_ghz``."""
    cyc, ins = PATH_CYCLES[name]
    return int(cyc / freq_ghz), ins
