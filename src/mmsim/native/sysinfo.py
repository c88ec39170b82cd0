"""What the host kernel says about itself: /proc/vmstat, /proc/meminfo, the
THP and hugetlb knobs in force, the kernel release, and whether ``perf`` works.

Everything here only reads; the one thing native mode ever writes to the
kernel (the hugetlb pool size) lives in :mod:`mmsim.native.safety`.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

PROC = Path("/proc")
THP_DIR = Path("/sys/kernel/mm/transparent_hugepage")
HUGEPAGES_DIR = Path("/sys/kernel/mm/hugepages")
NR_HUGEPAGES = PROC / "sys" / "vm" / "nr_hugepages"
HPAGE_BYTES = 2 << 20  # x86-64 PMD size: the default hugetlb page size and the THP size


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_vmstat(proc: Path = PROC) -> dict[str, int]:
    """/proc/vmstat as a dict (mm/vmstat.c vmstat_text names)."""
    out: dict[str, int] = {}
    for line in (_read(proc / "vmstat") or "").splitlines():
        name, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[name] = int(value)
    return out


def vmstat_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Event counters that moved between two snapshots (sorted by name).

    /proc/vmstat is system-wide: other processes on the host contribute too.
    """
    return {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] != before.get(k, 0)}


def read_meminfo(proc: Path = PROC) -> dict[str, int]:
    """/proc/meminfo values in KiB (counts such as HugePages_Total as plain numbers)."""
    out: dict[str, int] = {}
    for line in (_read(proc / "meminfo") or "").splitlines():
        m = re.match(r"^(\S+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def mem_available_bytes(proc: Path = PROC) -> int:
    """MemAvailable (mm/page_alloc.c si_mem_available), or MemFree on kernels before 3.14."""
    mi = read_meminfo(proc)
    return 1024 * mi.get("MemAvailable", mi.get("MemFree", 0))


def _bracketed(text: str | None) -> str:
    """'always [madvise] never' -> 'madvise'; '' when the file is absent."""
    m = re.search(r"\[(\w[\w+]*)\]", text or "")
    return m.group(1) if m else ""


def thp_settings(thp_dir: Path = THP_DIR) -> dict[str, str]:
    """The THP knobs in force (mm/huge_memory.c sysfs); empty when the kernel has no THP."""
    out: dict[str, str] = {}
    for knob in ("enabled", "defrag"):
        v = _bracketed(_read(thp_dir / knob))
        if v:
            out[f"thp.{knob}"] = v
    for knob in ("khugepaged/defrag", "use_zero_page"):
        raw = _read(thp_dir / knob)
        if raw is not None:
            out[f"thp.{knob}"] = raw
    return out


def hugetlb_settings(proc: Path = PROC) -> dict[str, str]:
    """The default-size hugetlb pool (mm/hugetlb.c hugetlb_report_meminfo)."""
    mi = read_meminfo(proc)
    keys = ("HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "Hugepagesize")
    out = {f"hugetlb.{k}": str(mi[k]) for k in keys if k in mi}
    oc = _read(proc / "sys" / "vm" / "nr_overcommit_hugepages")
    if oc is not None:
        out["hugetlb.nr_overcommit_hugepages"] = oc
    return out


PAGE_REPORTING = Path("/sys/module/page_reporting/parameters")


def page_reporting(params: Path = PAGE_REPORTING) -> dict[str, str]:
    """Free page reporting to a hypervisor (mm/page_reporting.c), when the guest kernel has it.

    Free blocks of ``page_reporting_order`` and above are handed back to the
    host; the next allocation of such a block (a THP, at order 9) faults the
    memory back in at the hypervisor, which the guest sees as a slow clear.
    """
    out: dict[str, str] = {}
    for name in ("page_reporting_order", "reported_kib"):
        v = _read(params / name)
        if v is not None:
            out[f"page_reporting.{name.removeprefix('page_reporting_')}"] = v
    return out


def kernel_release() -> str:
    return os.uname().release


def kernel_version(release: str | None = None) -> tuple[int, int]:
    """'6.18.44-fc-v669' -> (6, 18); (0, 0) when unparsable."""
    m = re.match(r"(\d+)\.(\d+)", release or kernel_release())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


# The boot messages printed exactly where a guest kernel installs pv_ops.mmu.tlb_remove_table =
# tlb_remove_table (arch/x86/kernel/kvm.c kvm_guest_init, arch/x86/hyperv/mmu.c hyperv_setup_mmu_ops)
PV_TABLE_FREE_MESSAGES = ("KVM setup pv remote TLB flush", "Using hypercall for remote TLB flush")


def pgtable_free(dmesg: str | None = None, release: str | None = None) -> tuple[str, str]:
    """How this host's kernel frees unmapped page tables, as policy ``pgtable_free`` names it, and why:
    ``rcu`` when the boot log shows a paravirt guest that set ``tlb_remove_table``, or else the kernel is
    v6.14+ (x86-64 frees them by RCU there on bare metal too); ``page`` otherwise (also when the log cannot
    be read: then the reason says so)."""
    if dmesg is None:
        try:
            import subprocess

            dmesg = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            dmesg = ""
    for msg in PV_TABLE_FREE_MESSAGES:
        if msg in dmesg:
            return "rcu", f"boot log: {msg!r} (pv_ops.mmu.tlb_remove_table = tlb_remove_table)"
    if kernel_version(release) >= (6, 14):
        return "rcu", (f"kernel {release or kernel_release()} >= 6.14: x86-64 frees page tables by RCU (the "
                       "series' merge window, not checked against a tag)")
    if dmesg:
        return "page", "boot log has no paravirt TLB-flush message"
    return "page", "boot log unreadable: assumed bare metal"


def pcp_sizes(zoneinfo: str | None = None) -> dict[str, int]:
    """The per-CPU pageset sizes of the zone this host allocates from first (the highest zone with managed
    pages: its zonelists start there), as policies ``pcp_batch``, ``pcp_high_min`` and ``pcp_high_max``
    name them, from ``/proc/zoneinfo``'s first CPU of that zone; empty when unreadable or when the kernel
    prints no ``high_min`` (before v6.7). The host's watermarks, and so ``high_min``, follow its boot-time
    memory, which a ballooned VM no longer has."""
    text = zoneinfo if zoneinfo is not None else (_read(PROC / "zoneinfo") or "")
    best: dict[str, int] = {}
    for block in re.split(r"^(?=Node \d+, zone)", text, flags=re.M):
        managed = re.search(r"^\s+managed\s+(\d+)", block, re.M)
        if not managed or int(managed.group(1)) == 0:
            continue
        cpu = re.search(r"cpu:\s*\d+\s*\n(.*?)(?=cpu:|\n\s*vm stats|\Z)", block, re.S)
        vals = {k: int(v) for k, v in re.findall(r"^\s+(batch|high_min|high_max):\s+(\d+)", cpu.group(1), re.M)} \
            if cpu else {}
        if {"batch", "high_min", "high_max"} <= set(vals):  # later zones (higher) replace earlier ones
            best = {"pcp_batch": vals["batch"], "pcp_high_min": vals["high_min"], "pcp_high_max": vals["high_max"]}
    return best


def memcg(cgroup: str | None = None) -> dict[str, str]:
    """This process's memory cgroup as policies ``memcg_kmem`` and ``memcg_levels`` name it, from
    ``/proc/self/cgroup``: a cgroup v1 ``memory`` controller line (``N:memory:/path``) gives ``v1``, else the
    unified hierarchy's ``0::/path`` gives ``v2``; the root memcg (path ``/``) is not charged (``off``).
    Levels: the path's depth + 1 (its page counters up to the root's). Empty when unreadable."""
    text = cgroup if cgroup is not None else (_read(PROC / "self" / "cgroup") or "")
    v1 = re.search(r"^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\S*)$", text, re.M)
    v2 = re.search(r"^0::(\S*)$", text, re.M)
    m, version = (v1, "v1") if v1 else (v2, "v2") if v2 else (None, "")
    if m is None:
        return {}
    depth = len([p for p in m.group(1).split("/") if p])
    if depth == 0:
        return {"memcg_kmem": "off"}
    return {"memcg_kmem": version, "memcg_levels": str(depth + 1)}


def perf_path() -> str | None:
    """The perf binary when present (whether it may count is checked when it runs)."""
    return shutil.which("perf")


def autogroup_note(proc: Path = PROC) -> str | None:
    """A warning when ``kernel.sched_autogroup_enabled`` is 1: CPU time is then shared between sessions
    (autogroups) first, and a niced job started from another session still takes an equal share from a
    native measurement (docs/validation.md, session 13). None when autogroup is off or absent."""
    if _read(proc / "sys" / "kernel" / "sched_autogroup_enabled") != "1":
        return None
    return ("kernel.sched_autogroup_enabled=1: jobs from other sessions take an equal CPU share whatever their "
            "nice; stop them, or turn it off (echo 0 > /proc/sys/kernel/sched_autogroup_enabled) for native "
            "measurements")


def is_root() -> bool:
    return os.geteuid() == 0


def hugetlb_pool_pages() -> int | None:
    """nr_hugepages of the default size, or None when the kernel has no hugetlb."""
    v = _read(NR_HUGEPAGES)
    return int(v) if v is not None and v.isdigit() else None
