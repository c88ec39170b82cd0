"""Kernels, patches, --set overrides and kernel YAML files."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmsim.errors import UserError
from mmsim.kernels import KERNELS, PATCHES, POLICIES, resolve
from mmsim.kernels.catalog import load_kernel_yaml, size_bytes

V312 = {
    "spinlock": "ticket",
    "pmd_ptl": "mm",
    "pte_ptl": "split",
    "thp": "always",
    "rwsem_spin_on_owner": "off",
    "locktorture_rand": "shared",
    "hugetlb_fault_lock": "instantiation-mutex",
    "nr_ptes_atomic": "off",
    "vma_cache": "mm",
    "stat_interval_ms": "1000",
    "pcp_batch_cap": "512k",
    "pcp_batch": "auto",
    "pcp_orders": "0",
    "pcp_high": "6xbatch",
    "percpu_pagelist_high_fraction": "0",
    "pcp_free_factor": "off",
    "pcp_free_high": "off",
    "pcp_free_high_batch": "off",
    "skb_small_head": "off",
    "memcg_kmem": "v2",
    "memcg_levels": "2",
    "pgtable_account": "off",
    "huge_clear_order": "sequential",
    "huge_copy_order": "sequential",
    "hugetlb_fault_hash": "private-by-mm",
    "rwsem_reader_wake": "until-writer",
    "hugetlb_i_mmap_rwsem": "never",
    "rwsem_writer_spin_on_readers": "off",
    "rwsem_reader_spin": "off",
    "rwsem_reader_steal": "off",
    "rwsem_reader_spin_adaptive": "off",
    "rwsem_handoff": "off",
    "rwsem_wait_lock": "on",
    "rwsem_wake_in_wait_lock": "on",
    "mutex_wake_in_wait_lock": "on",
    "mutex_osq": "off",
    "mutex_handoff": "off",
    "mmap_lock_name": "mmap_sem",
    "spinlock_page_table_lock": "default",
    "spinlock_ptlock": "default",
    "spinlock_zone_lock": "default",
    "spinlock_hugetlb_lock": "default",
    "spinlock_list_lock": "default",
    "spinlock_unix_lock": "default",
    "spinlock_lockstress": "default",
    "numa_balancing": "0",
    "numa_scan_check": "page-first",
    "numa_balancing_scan_delay_ms": "1000",
    "numa_balancing_scan_period_min_ms": "1000",
    "numa_balancing_scan_period_max_ms": "60000",
    "numa_balancing_scan_size_mb": "256",
    "numa_balancing_hot_threshold_ms": "1000",
    "numa_balancing_promote_rate_limit_mbps": "65536",
    "vma_lock": "off",
    "vma_lock_fault_around": "off",
    "vma_lock_cow_fault": "off",
    "vma_lock_shared_fault": "off",
    "vma_lock_read_fault": "off",
    "vma_lock_anon_vma": "check",  # a373baed5a9d / 737019cf6ac5 (v6.10): retry / trylock
    "pcp_batch_scale_max": "off",
    "pcp_alloc_factor": "off",
    "pcp_high_tuning": "off",
    "pcp_below_high": "off",
    "pcp_free_count": "off",
    "pcp_free_high_threshold": "batch",  # c544a952ba61 (v6.15): batch + high_min / 2
    "pcp_high_min": "auto",  # the host's /proc/zoneinfo values are set per host (validate native)
    "pcp_high_max": "auto",
    # issue 22: mappings and THP alignment
    "thp_anon_align": "off",
    "dev_zero_align": "off",
    "thp_cow": "copy",  # issue 15: 3917c80280c9 (v5.8) sets "split"
    "pgtable_free": "page",  # issues 15/22: bare-metal tlb_remove_page; "rcu" is set per host (validate native)
    "zone_flags_line": "none",  # session 28: 1c30844d2dfe (v5.0) "free_area", dcdfdd40fa82 (v6.5) "lock"
    "zone_flags_free": "off",  # session 28: c49c2c47dab6 (v5.14) "on"
}


def test_v312() -> None:
    k = resolve("v3.12")
    assert k.name == "v3.12"
    assert k.policies == V312
    assert k.patches == ()
    assert k.get("spinlock") == "ticket" and not k.flag("nr_ptes_atomic")


def test_v313_is_v312_plus_the_two_v313_patches() -> None:
    k = resolve("v3.13")
    # the split PMD lock series (generic e009bb30c8df, then the x86 enabling patch) and nr_ptes
    assert k.patches == ("e009bb30c8df", "x86-splitpmd", "e1f56c89b040")
    assert k.policies == {**V312, "pmd_ptl": "split", "nr_ptes_atomic": "on"}
    assert k.flag("nr_ptes_atomic")


def test_later_releases_accumulate_patches() -> None:
    assert resolve("v3.12").policies["spinlock"] == "ticket"
    k = resolve("v4.13")
    # v3.15 per-thread vma cache, hugetlb fault table and mutex OSQ, v3.16 rwsem spinning, v4.10 mutex
    # handoff, v4.2 qspinlock, v4.8 page tables charged to the memcg, v4.6 / v4.8 the mutex's and the
    # rwsem's wake-ups after wait_lock.
    assert k.patches == ("e009bb30c8df", "x86-splitpmd", "e1f56c89b040", "615d6e8756c8", "8382d914ebf7",
                         "fb0527bd5ea9", "4fc828e24cd9", "9d659ae14b54", "a33fda35e3a7", "1329ce6fbbe4",
                         "133e89ef5ef3", "3e79ec7")
    assert k.policies == {
        **V312, "pmd_ptl": "split", "nr_ptes_atomic": "on", "hugetlb_fault_lock": "fault-mutex-table",
        "vma_cache": "task",
        "rwsem_spin_on_owner": "on", "spinlock": "queued", "mutex_osq": "on", "mutex_handoff": "on",
        "pgtable_account": "on", "mutex_wake_in_wait_lock": "off", "rwsem_wake_in_wait_lock": "off",
    }
    assert resolve("v4.14").policies == {**k.policies, "huge_clear_order": "target-last"}
    assert resolve("v4.14").patches[-1] == "c79b57e462b5"
    assert resolve("v4.18").policies["huge_copy_order"] == "target-last"
    assert resolve("v4.17").policies["huge_copy_order"] == "sequential"


def test_lock_behaviours_by_version() -> None:
    """rwsem/mutex policies as each release had them (commits in the catalogue)."""
    def lk(v: str) -> tuple[str, ...]:
        p = resolve(v).policies
        return tuple(p[n] for n in ("rwsem_spin_on_owner", "rwsem_writer_spin_on_readers", "rwsem_reader_spin",
                                    "rwsem_reader_steal", "rwsem_reader_spin_adaptive",
                                    "rwsem_handoff", "rwsem_reader_wake", "mutex_osq",
                                    "mutex_handoff", "mmap_lock_name", "rwsem_wait_lock", "rwsem_wake_in_wait_lock",
                                    "mutex_wake_in_wait_lock"))
    on, off = ("on", "on", "on"), ("on", "off", "off")  # the wait_lock, and the wake-ups inside it or not
    assert lk("v3.12") == ("off", "off", "off", "off", "off", "off", "until-writer", "off", "off", "mmap_sem", *on)
    assert lk("v4.13") == ("on", "off", "off", "off", "off", "off", "until-writer", "on", "on", "mmap_sem", *off)
    assert lk("v5.4") == ("on", "on", "on", "off", "on", "on", "all", "on", "on", "mmap_sem", *off)
    assert lk("v5.7") == lk("v5.4")  # the hugetlb-rwsem arms (c0d0381ade79, v5.7) run v5.3's rwsem
    assert lk("c0d0381ade79") == lk("v5.4")
    assert lk("v6.6") == ("on", "on", "off", "on", "off", "on", "all", "on", "on", "mmap_lock", *off)
    assert set(KERNELS) == {"v3.12", "v3.13", "v4.13", "v4.14", "v4.17", "v4.18", "v5.4", "v5.5", "v5.6", "v5.7",
                            "v6.6", "v6.7", "v6.12", "v6.15", "c0d0381ade79^", "c0d0381ade79", "c0d0381ade79+fix",
                            "d4148aeab412^", "d4148aeab412", "849d5cff4d48^", "849d5cff4d48"}  # issue 22


def test_mmap_alignment_kernels_differ_only_by_their_patch() -> None:
    base, fix = resolve("d4148aeab412^"), resolve("d4148aeab412")
    assert base.get("thp_anon_align") == "pmd-if-large" and fix.get("thp_anon_align") == "pmd-if-multiple"
    assert {k for k in base.policies if base.policies[k] != fix.policies[k]} == {"thp_anon_align"}
    dz0, dz1 = resolve("849d5cff4d48^"), resolve("849d5cff4d48")
    assert {k for k in dz0.policies if dz0.policies[k] != dz1.policies[k]} == {"dev_zero_align"}
    assert resolve("v6.7").get("thp_anon_align") == "off"  # efa7df3e3bb5 is v6.8


def test_every_kernel_sets_every_policy_to_an_allowed_value() -> None:
    for k in KERNELS.values():
        assert set(k.policies) == set(POLICIES), k.name
        for name, v in k.policies.items():
            assert POLICIES[name].check(v, k.name) == v
    for p in PATCHES.values():
        for name, v in p.changes.items():
            assert POLICIES[name].check(v, p.commit) == v


@pytest.mark.parametrize("pid", ["e009bb3", "e009bb30c8df", "e009bb30c8"])
def test_patch_by_prefix(pid: str) -> None:
    k = resolve("v3.12", [pid])
    assert k.patches == ("e009bb30c8df",)
    assert k.policies == V312  # generic only: x86 splits PMD locks with x86-splitpmd
    assert resolve("v3.12", [pid, "x86-splitpmd"]).policies == {**V312, "pmd_ptl": "split"}
    assert k.name == "v3.12+e009bb30c8df"  # the 12-character id however it was typed


def test_patches_apply_in_order_on_top_of_the_kernel() -> None:
    k = resolve("v3.13", ["a33fda3", "4fc828e"])
    assert k.patches == ("e009bb30c8df", "x86-splitpmd", "e1f56c89b040", "a33fda35e3a7", "4fc828e24cd9")
    assert k.policies["spinlock"] == "queued" and k.policies["rwsem_spin_on_owner"] == "on"


@pytest.mark.parametrize("pid", ["e009bb", "deadbeef00", "", "E009BB3"])
def test_bad_patch_is_a_user_error(pid: str) -> None:
    # Fewer than 7 characters, unknown, or not lower-case hex of a catalogued commit.
    with pytest.raises(UserError) as e:
        resolve("v3.12", [pid])
    assert e.value.field == "patch" and e.value.value == pid
    assert "e009bb30c8df" in e.value.allowed


def test_overrides() -> None:
    k = resolve("v3.13", overrides={"thp": "never", "stat_interval_ms": "250"})
    assert k.policies == {**resolve("v3.13").policies, "thp": "never", "stat_interval_ms": "250"}
    assert k.name == "v3.13,stat_interval_ms=250,thp=never"  # overrides sorted in the label


def test_override_with_an_int_value() -> None:
    assert resolve("v3.13", overrides={"stat_interval_ms": 500}).policies["stat_interval_ms"] == "500"  # type: ignore[dict-item]


def test_bad_policy_value_names_the_field() -> None:
    with pytest.raises(UserError) as e:
        resolve("v3.13", overrides={"thp": "sometimes"})
    assert e.value.field == "--set.thp"
    assert e.value.value == "sometimes"
    assert e.value.allowed == "always, madvise, never"
    assert str(e.value) == "--set.thp: invalid value 'sometimes'; allowed: always, madvise, never"


def test_bad_integer_policy_value() -> None:
    with pytest.raises(UserError) as e:
        resolve("v3.13", overrides={"stat_interval_ms": "-5"})
    assert (e.value.field, e.value.allowed) == (
        "--set.stat_interval_ms", "an integer 0..2147483647 (proc_dointvec_jiffies: an int)")


@pytest.mark.parametrize(("name", "value"), [
    ("pcp_batch", "127"), ("pcp_batch", "1"), ("pcp_batch", "auto"), ("pcp_batch", str(2**31 - 1)),
    ("pcp_batch_cap", "2m"), ("pcp_batch_cap", "4k"), ("pcp_batch_cap", "512k"),
    ("percpu_pagelist_high_fraction", "8"), ("percpu_pagelist_high_fraction", "0"),
    ("numa_balancing_scan_delay_ms", str(2**32 - 1)),
])
def test_numeric_policy_takes_any_value_within_the_kernels_bounds(name: str, value: str) -> None:
    assert resolve("v6.6", overrides={name: value}).policies[name] == value


@pytest.mark.parametrize(("name", "value", "allowed"), [
    ("pcp_batch", "0", "auto or an integer 1..2147483647 (zone_batchsize() clamps to >= 1; pcp->batch is an int)"),
    ("pcp_batch", str(2**31), "auto or an integer 1..2147483647 (zone_batchsize() clamps to >= 1; "
     "pcp->batch is an int)"),
    ("pcp_batch", "12.5", "auto or an integer 1..2147483647 (zone_batchsize() clamps to >= 1; pcp->batch is an int)"),
    ("pcp_batch_cap", "2x", "a size 4k..8t (k/m/g suffixes) (at least a page; cap / PAGE_SIZE / 4 fits the int "
     "pcp->batch)"),
    ("pcp_batch_cap", "1k", "a size 4k..8t (k/m/g suffixes) (at least a page; cap / PAGE_SIZE / 4 fits the int "
     "pcp->batch)"),
    ("percpu_pagelist_high_fraction", "7", "0 or an integer 8..2147483647 (MIN_PERCPU_PAGELIST_HIGH_FRACTION)"),
    ("numa_balancing_scan_size_mb", "0", "an integer 1..4294967295 (unsigned int; 0 would divide by zero in "
     "task_nr_scan_windows()'s round_up)"),
])
def test_numeric_policy_outside_the_kernels_bounds(name: str, value: str, allowed: str) -> None:
    with pytest.raises(UserError) as e:
        resolve("v6.6", overrides={name: value})
    assert (e.value.field, e.value.value, e.value.allowed) == (f"--set.{name}", value, allowed)


def test_every_policy_names_its_kernel_source_and_every_default_passes_its_check() -> None:
    for name, p in POLICIES.items():
        assert p.source, name
        assert p.kind in ("choice", "int", "size"), name
        assert p.check(V312[name], "v3.12") == V312[name]


def test_unicode_digit_is_not_a_non_negative_integer() -> None:
    with pytest.raises(UserError):
        resolve("v3.13", overrides={"stat_interval_ms": "²"})


def test_unknown_policy_name() -> None:
    with pytest.raises(UserError) as e:
        resolve("v3.13", overrides={"thp_mode": "never"})
    assert (e.value.field, e.value.value) == ("--set", "thp_mode")
    assert "thp" in e.value.allowed.split(", ")


def test_unknown_kernel() -> None:
    with pytest.raises(UserError) as e:
        resolve("v2.6")
    assert (e.value.field, e.value.value) == ("kernel", "v2.6")
    assert e.value.allowed.endswith("or a kernel YAML file")


# -- kernel YAML -----------------------------------------------------------------


def _write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_kernel_yaml(tmp_path: Path) -> None:
    p = _write(tmp_path, "name: my-kernel\nbase: v3.12\npatches: [e009bb3]\n"
               "policies: {thp: never, stat_interval_ms: 100}\ndescription: test kernel\n")
    k = load_kernel_yaml(p)
    assert (k.name, k.base, k.description) == ("my-kernel", "v3.12", "test kernel")
    assert k.patches == ("e009bb30c8df",)
    assert k.policies == {**V312, "thp": "never", "stat_interval_ms": "100"}
    r = resolve(str(p))
    assert r.name == "my-kernel" and r.policies == k.policies and r.patches == k.patches
    # Patches and overrides still apply on top of a YAML kernel.
    r2 = resolve(str(p), ["a33fda3"], {"thp": "always"})
    assert r2.policies == {**k.policies, "spinlock": "queued", "thp": "always"}
    assert r2.name == "my-kernel+a33fda35e3a7,thp=always"


def test_kernel_yaml_name_defaults_to_file_stem(tmp_path: Path) -> None:
    k = load_kernel_yaml(_write(tmp_path, "base: v3.13\n", "k313.yml"))
    assert (k.name, k.base) == ("k313", "v3.13")
    assert (k.policies, k.patches) == (resolve("v3.13").policies,
                                       ("e009bb30c8df", "x86-splitpmd", "e1f56c89b040"))


@pytest.mark.parametrize(
    ("text", "field", "value"),
    [
        ("base: [unclosed\n", "k.yaml", "expected ',' or ']', but got '<stream end>' at line 2, column 1"),
        ("- v3.12\n", "k.yaml", "list"),
        ("base: v3.12\nflavour: vanilla\n", "k.yaml: flavour", "unknown key"),
        ("base: v9.9\n", "k.yaml: base", "v9.9"),
        ("name: x\n", "k.yaml: base", ""),
        ("base: v3.12\npatches: e009bb3\n", "k.yaml: patches", "e009bb3"),
        ("base: v3.12\npolicies: [thp]\n", "k.yaml: policies", ["thp"]),
        ("base: v3.12\npolicies: {thp: sometimes}\n", "k.yaml.thp", "sometimes"),
        ("base: v3.12\npolicies: {thpp: never}\n", "k.yaml", "thpp"),
        ("base: v3.12\npatches: [bad]\n", "patch", "bad"),
    ],
)
def test_kernel_yaml_errors(tmp_path: Path, text: str, field: str, value: object) -> None:
    p = _write(tmp_path, text, "k.yaml")
    with pytest.raises(UserError) as e:
        resolve(str(p))
    assert (e.value.field, e.value.value) == (field, value)


def test_missing_kernel_yaml(tmp_path: Path) -> None:
    p = tmp_path / "nope.yaml"
    with pytest.raises(UserError) as e:
        resolve(str(p))
    assert (e.value.field, e.value.value) == ("nope.yaml", str(p))
    assert e.value.allowed == "a kernel YAML file that exists and is readable (No such file or directory)"


def test_kernel_yaml_on_off_values(tmp_path: Path) -> None:
    p = _write(tmp_path, "base: v3.12\npolicies:\n  nr_ptes_atomic: on\n  rwsem_spin_on_owner: off\n")
    k = load_kernel_yaml(p)
    assert k.policies["nr_ptes_atomic"] == "on" and k.policies["rwsem_spin_on_owner"] == "off"


def test_hugetlb_rwsem_kernels_differ_only_by_the_policy() -> None:
    parent, bad, fix = resolve("c0d0381ade79^"), resolve("c0d0381ade79"), resolve("c0d0381ade79+fix")
    assert parent.policies == resolve("v5.6").policies
    assert parent.policies["rwsem_reader_wake"] == "all"  # d3681e269fff, v5.3
    assert parent.policies["hugetlb_fault_hash"] == "mapping-index"  # 1b426bac66e6, v5.2
    assert resolve("v4.18").policies["hugetlb_fault_hash"] == "private-by-mm"
    assert parent.policies["hugetlb_i_mmap_rwsem"] == "never"
    assert bad.policies == {**parent.policies, "hugetlb_i_mmap_rwsem": "always"}
    assert fix.policies == {**parent.policies, "hugetlb_i_mmap_rwsem": "if-shareable"}
    assert bad.patches[-1] == "c0d0381ade79" and fix.patches[-1] == "hugetlb-rwsem-if-shareable"
    assert resolve("v5.7").policies["hugetlb_i_mmap_rwsem"] == "always"
    assert resolve("v6.6").policies["hugetlb_i_mmap_rwsem"] == "never"  # 3a47c54f09c4 (v6.1) reverted it
    # the unmerged fix has no release: no release kernel picks it up, but --patch applies it
    assert "hugetlb-rwsem-if-shareable" not in resolve("v6.7").patches
    assert resolve("v5.7", ["hugetlb-rwsem-if-shareable"]).policies["hugetlb_i_mmap_rwsem"] == "if-shareable"


def test_pcp_batch_and_cap_reach_the_page_allocator() -> None:
    from mmsim.machine import get_machine
    from mmsim.mm.page_alloc import zone_batchsize
    from mmsim.mm.system import System

    tiny = get_machine("tiny")
    z = System(tiny, resolve("v6.6", overrides={"pcp_batch": "127"}), 0).page_alloc.zones[0]
    # pcp->batch as set; zone_highsize: low watermark 986 / 4 CPUs = 246, at least 4 x 127
    assert (z.batch, z.high) == (127, 508)
    # a 2 MiB cap: 512 pages / 4 = 128 → rounddown_pow_of_two(192) - 1, on a zone of >= 2^19 pages
    cap = size_bytes(resolve("v6.6", overrides={"pcp_batch_cap": "2m"}).policies["pcp_batch_cap"])
    assert (cap, zone_batchsize(1 << 20, cap)) == (2 << 20, 127)
    # tiny's 1 GiB zones: managed >> 10 = 256 pages caps it first
    assert System(tiny, resolve("v6.6", overrides={"pcp_batch_cap": "2m"}), 0).page_alloc.zones[0].batch == 63


def test_kernel_as_users_write_it() -> None:
    from mmsim.kernels.catalog import resolve_kernel, split_kernel

    assert split_kernel("v6.6+362d37a106dd+94a3bfe") == ("v6.6", ("362d37a106dd", "94a3bfe"))
    assert split_kernel("c0d0381ade79+fix") == ("c0d0381ade79+fix", ())  # a catalogued name with a "+"
    k = resolve_kernel("v6.6+362d37a106dd")
    assert (k.name, k.patches[-1], k.policies["pcp_free_high_batch"]) == ("v6.6+362d37a106dd", "362d37a106dd", "llc")


def test_patch_yaml_file(tmp_path: Path) -> None:
    from mmsim.kernels.catalog import resolve_kernel

    f = _write(tmp_path, "commit: batch127\nsubject: 'mm, pcp: a batch of 127'\nchanges:\n  pcp_batch: 127\n",
               "b127.yaml")
    k = resolve("v6.6", [str(f)])
    assert (k.name, k.patches[-1], k.policies["pcp_batch"]) == ("v6.6+batch127", "batch127", "127")
    assert resolve_kernel(f"v6.6+{f}").policies == k.policies


@pytest.mark.parametrize(("text", "field"), [
    ("changes:\n  pcp_batch: 0\n", "b.yaml: changes.pcp_batch"),
    ("changes:\n  nope: 1\n", "b.yaml: changes"),
    ("changes: {}\n", "b.yaml: changes"),
    ("commit: x\nchanges:\n  thp: never\nauthor: me\n", "b.yaml: author"),
    ("- a\n", "b.yaml"),
])
def test_bad_patch_yaml_is_a_user_error(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(UserError) as e:
        resolve("v6.6", [str(_write(tmp_path, text, "b.yaml"))])
    assert e.value.field == field


def test_vma_lock_by_release() -> None:
    """The per-VMA lock (issue 22): anonymous VMAs from v6.4, file VMAs and fault-around from v6.6, read,
    COW and shared faults from v6.7."""
    names = ("vma_lock", "vma_lock_fault_around", "vma_lock_read_fault", "vma_lock_cow_fault",
             "vma_lock_shared_fault")

    def lk(k: str) -> tuple[str, ...]:
        return tuple(resolve(k).policies[n] for n in names)

    assert lk("v5.7") == ("off", "off", "off", "off", "off")
    assert lk("v6.6") == ("file", "on", "off", "off", "off")
    assert lk("v6.7") == ("file", "on", "on", "on", "on")
    assert resolve("v6.6", ["4ed4379881aa"]).policies["vma_lock_shared_fault"] == "on"
