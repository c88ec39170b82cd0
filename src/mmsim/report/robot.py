"""A compare in two more layouts users know: the kernel test robot's email and mmtests' compare table.

Both take a ``Comparison.to_dict()`` (two or more kernels; :func:`pair` picks the base and one other
kernel out of an N-kernel compare), so a saved ``--json`` prints the same text.

**The robot's email** (``compare --format robot``), one per kernel after the base, as the 0-day
robot wrote it in 2020 (seeds/004, the c0d0381ade79 report)::

    Subject: [hugetlbfs] c0d0381ade: vm-scalability.throughput -33.4% regression

    Greeting,

    FYI, we noticed a -33.4% regression of vm-scalability.throughput due to commit:


    commit: c0d0381ade79 ("hugetlbfs: use i_mmap_rwsem for more pmd sharing synchronization")

    in testcase: vm-scalability
    on test machine: 288 threads Intel(R) Xeon Phi(TM) CPU 7295 @ 1.50GHz with 80G memory
    with following parameters:

        runtime: 300s
        ...

then "Details are as below:", the job's sorted key/value header
(``param/.../tbox_group/test/testcase:``), the ``commit:`` legend (base, then the commit) and the LKP
%stddev/%change table of the two. An improvement is written without a sign ("a 49.5% improvement
of"), as the robot does; no significant change gives no email, only a line saying so.

**mmtests** (``compare --format mmtests``): compare-kernels' layout, one block of rows per benchmark
metric: ``Min``, ``Amean``, ``Hmean`` (all values > 0), ``Stddev``, ``CoeffVar``, ``Max``, each kernel's
value with ``(  x.xx%)`` against the base. As in mmtests, the percentage is the gain: positive is
better (``(new - base) / base`` for a higher-is-better metric, ``(base - new) / base`` for a
lower-is-better one and for Stddev and CoeffVar; plain ``(new - base) / base`` for a metric of unknown
direction). An Amean/Hmean change that this compare finds significant (LKP's rule and Welch's t-test
agree) is marked ``*  x.xx%*`` instead of the parentheses.
"""

from __future__ import annotations

import statistics
from typing import Any

from mmsim.report.lkp import _columns, lkp_table

# -- picking one kernel out of an N-kernel compare ---------------------------------------------


def pair(d: dict[str, Any], i: int) -> dict[str, Any]:
    """The 2-kernel compare dict of the base and kernel ``i`` (1 = the first after the base)."""
    arms = d["arms"]
    if not 1 <= i < len(arms):
        raise IndexError(i)
    metrics = []
    for m in d["metrics"]:
        col = _columns(m)[i - 1]
        mm = {k: v for k, v in m.items() if k != "columns"}
        mm.update({k: v for k, v in col.items() if k != "kernel"})
        metrics.append(mm)
    culprits = d.get("culprits") or [d.get("culprit", "")]
    return {**d, "arms": [arms[0], arms[i]], "metrics": metrics, "culprit": culprits[i - 1],
            "culprits": [culprits[i - 1]]}


# -- the robot's email ----------------------------------------------------------------------------


def _headline(d: dict[str, Any]) -> dict[str, Any] | None:
    """The robot's headline metric of a 2-kernel compare: the first significant benchmark metric by KPI rank."""
    from mmsim.experiments.stats import kpi_rank

    rows = [m for m in d["metrics"] if m["benchmark"] and m.get("verdict") in ("regression", "improvement", "change")]
    return min(rows, key=lambda m: kpi_rank(m["metric"])) if rows else None


def _testcase(workload: str) -> tuple[str, str]:
    """LKP's testcase and ``test:`` of a workload: ``vm-scalability/anon-w-seq`` → (vm-scalability, anon-w-seq)."""
    family, _, test = workload.partition("/")
    return family, test


def _machine_line(name: str) -> str:
    """``on test machine:`` as the robot writes it (threads, sockets, the CPU, memory), from the preset."""
    from mmsim.errors import UserError
    from mmsim.machine import get_machine

    try:
        m = get_machine(name)
    except (UserError, OSError):  # a machine file that is not here any more: its name only
        return name
    mem = sum(n.memory_gib for n in m.nodes)
    return f"{m.ncpus} threads {len(m.sockets)} sockets {m.description} with {mem:.0f}G memory"


def _commit(d: dict[str, Any]) -> tuple[str, str, str]:
    """(id, subject, subsystem) of the one commit that separates the kernels, or of the kernel itself
    (its label) when more than one patch or a policy separates them."""
    from mmsim.kernels.catalog import PATCHES

    base, other = d["arms"][0], d["arms"][1]
    added = [c for c in other["patches"] if c not in base["patches"]]
    if len(added) == 1 and all(c in other["patches"] for c in base["patches"]):
        p = PATCHES.get(added[0])
        subject = p.subject if p else ""
        subsystem = subject.split(":", 1)[0] if ":" in subject else "mm"
        return added[0][:12], subject, subsystem
    return other["kernel"], d.get("culprit") or "", "mm"


def robot_email(d: dict[str, Any]) -> str:
    """The robot's email for a 2-kernel compare dict (see the module docstring)."""
    head = _headline(d)
    base, other = d["arms"][0]["kernel"], d["arms"][1]["kernel"]
    if head is None:
        return f"no significant change of a benchmark metric between {base} and {other}: the robot sends no email"
    commit, subject, subsystem = _commit(d)
    pct = head["pct_change"]
    kind = {"change": "change"}.get(head["verdict"], head["verdict"])
    pct_s = f"{pct:.1f}%"
    testcase, test = _testcase(d["workload"])
    params = {k: str(v) for k, v in d["params"].items()}
    if test:
        params["test"] = test
    lines = [
        f"Subject: [{subsystem}] {commit[:10]}: {head['metric']} {pct_s} {kind}",
        "",
        "Greeting,",
        "",
        f"FYI, we noticed a {pct_s} {kind} of {head['metric']} due to commit:",
        "",
        "",
        f'commit: {commit} ("{subject}")' if subject else f"commit: {commit}",
        "",
        f"in testcase: {testcase}",
        f"on test machine: {_machine_line(d['machine'])}",
        "with following parameters:",
        "",
        *(f"\t{k}: {v}" for k, v in params.items()),
        "",
        "",
        "Details are as below:",
        "-" * 98 + ">",
        "",
    ]
    job = {**params, "tbox_group": d["machine"], "testcase": testcase}
    keys = sorted(job)
    lines += ["=" * 89, "/".join(keys) + ":", "  " + "/".join(job[k] for k in keys), "",
              "commit: ", f"  {base}", f'  {commit} ("{subject}")' if subject else f"  {other}", "",
              lkp_table(d), "", "",
              f"(simulated by mmsim: {d['runs']} run(s) per kernel, seeds {d['seeds']}; not a measurement)"]
    return "\n".join(lines)


def robot_emails(d: dict[str, Any]) -> str:
    """One robot email per kernel after the base, separated by a line of ``=``."""
    return ("\n\n" + "=" * 98 + "\n\n").join(robot_email(pair(d, i)) for i in range(1, len(d["arms"])))


# -- mmtests ------------------------------------------------------------------------------------


def _hmean(values: list[float]) -> float | None:
    return statistics.harmonic_mean(values) if values and all(v > 0 for v in values) else None


def _gain(base: float, new: float, higher_better: bool | None) -> float:
    if base == 0:
        return 0.0
    if higher_better is False:
        return 100.0 * (base - new) / base
    return 100.0 * (new - base) / base


def _num(v: float) -> str:
    """mmtests prints two decimals; a value below 1 keeps four significant digits instead of 0.00."""
    return f"{v:.2f}" if abs(v) >= 1 or v == 0 else f"{v:.4g}"


def _ops(values: list[float]) -> dict[str, float | None]:
    mean = statistics.fmean(values) if values else 0.0
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"Min": min(values, default=0.0), "Amean": mean, "Hmean": _hmean(values), "Stddev": sd,
            "CoeffVar": 100.0 * sd / mean if mean else 0.0, "Max": max(values, default=0.0)}


def mmtests_table(d: dict[str, Any], show_all: bool = False) -> str:
    """mmtests' compare-kernels table of a compare dict (two or more kernels; module docstring)."""
    from mmsim.experiments.stats import direction

    kernels = [a["kernel"] for a in d["arms"]]
    rows = [m for m in d["metrics"] if m["benchmark"] or show_all]
    blocks: list[list[tuple[str, str, list[str]]]] = []
    for m in rows:
        cols = _columns(m)
        dirn = direction(m["metric"])
        hb = True if dirn == 1 else (False if dirn == -1 else None)
        base = _ops(m["a"]["values"])
        others = [_ops(c["b"]["values"]) for c in cols]
        block = []
        for op in ("Min", "Amean", "Hmean", "Stddev", "CoeffVar", "Max"):
            if base[op] is None or any(o[op] is None for o in others):
                continue
            b0 = float(base[op] or 0.0)
            cells = [f"{_num(b0)} (   0.00%)"]
            for c, o in zip(cols, others, strict=True):
                v = float(o[op] or 0.0)
                g = _gain(b0, v, False if op in ("Stddev", "CoeffVar") else hb)
                sig = op in ("Amean", "Hmean") and c.get("significant")
                cells.append(f"{_num(v)} " + (f"*{g:7.2f}%*" if sig else f"({g:7.2f}%)"))
            block.append((op, m["metric"], cells))
        blocks.append(block)
    namew = max([len(m["metric"]) for m in rows] + [10])
    cellw = max([len(c) for b in blocks for _, _, cells in b for c in cells] + [len(k) for k in kernels] + [20])
    out = [f"mmtests-style compare: {d['workload']} on {d['machine']}, {d['runs']} run(s) per kernel "
           "(%: gain over the base, positive = better; *x%*: significant)",
           " " * (10 + namew) + "".join(f" {k:>{cellw}}" for k in kernels)]
    for block in blocks:
        for op, metric, cells in block:
            out.append(f"{op:<9} {metric:<{namew}}" + "".join(f" {c:>{cellw}}" for c in cells))
    return "\n".join(out)
