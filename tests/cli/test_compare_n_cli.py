"""compare takes N >= 2 kernels LKP-style: the base, then a %change / %stddev column per kernel."""

from __future__ import annotations

import json

import pytest

from mmsim.cli import main

Cap = pytest.CaptureFixture[str]
SMALL = ("--machine", "tiny", "-p", "tasks=2", "-p", "iterations=100", "-r", "2", "--executor", "serial",
         "--no-store")


def test_three_kernels_lkp_table(capsys: Cap) -> None:
    code = main(["compare", "lockstress", "-k", "v3.12", "-k", "v3.13", "-k", "v4.14", *SMALL])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.strip().startswith("v3.12"))
    assert lines[i].split() == ["v3.12", "v3.13", "v4.14"]
    assert lines[i + 2].split() == ["%stddev", "%change", "%stddev", "%change", "%stddev"]
    row = next(ln for ln in lines if ln.endswith("  lockstress.acquisitions_per_second") and "%" in ln)
    assert len([x for x in row.split() if x.endswith("%")]) == 2  # a %change per kernel after the base
    # one verdict line per kernel against the base
    verdicts = [ln for ln in lines if ln.startswith(("no significant change", "FYI, we noticed"))]
    assert len(verdicts) == 2
    assert verdicts[0].endswith("between v3.12 and v3.13")  # no modelled change for a spinlock at 2 tasks


def test_three_kernels_json_columns(capsys: Cap) -> None:
    assert main(["compare", "lockstress", "-k", "v3.12", "-k", "v3.13", "-k", "v4.14", *SMALL, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [a["kernel"] for a in d["arms"]] == ["v3.12", "v3.13", "v4.14"]
    m = next(m for m in d["metrics"] if m["metric"] == "lockstress.acquisitions_per_second")
    assert [c["kernel"] for c in m["columns"]] == ["v3.13", "v4.14"]
    assert m["columns"][0]["b"] == m["b"] and m["columns"][0]["pct_change"] == m["pct_change"]
    # v4.14 against the base v3.12: its thirteen catalogued patches (queued spinlocks, a33fda35e3a7, among them;
    # the split PMD lock's x86 enabling patch and the v3.15/v4.10 mutex patches since issue 16, the v4.8 page-table
    # memcg charge since session 18, the v4.6/v4.8 wait_lock wake-up moves since session 27, the v3.15 per-thread
    # vma cache since session 31)
    assert d["culprits"][1].startswith("13 patches: ") and "a33fda35e3a7" in d["culprits"][1]


def test_one_kernel_is_refused(capsys: Cap) -> None:
    assert main(["compare", "lockstress", "-k", "v3.12", *SMALL]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two or more kernels" in err


def test_noise_gives_repeats_a_spread_from_start_skew(capsys: Cap) -> None:
    from mmsim.experiments.run import RunSpec, run

    spec = RunSpec("lockstress", params={"tasks": "4", "iterations": "200"})
    plain = [run(RunSpec(**{**spec.__dict__, "seed": s})).metrics for s in (0, 1)]
    assert plain[0] == plain[1]  # without noise, seeds do not matter to lockstress
    noisy = [run(RunSpec(**{**spec.__dict__, "seed": s, "noise": True})) for s in (0, 1, 0)]
    assert noisy[0].metrics != noisy[1].metrics  # each seed its own start skew...
    assert noisy[0].to_dict() | {"sim": {}} == noisy[2].to_dict() | {"sim": {}}  # ...and the same one again
    assert noisy[0].to_dict()["noise"] == "start-skew,timer-tick,device-irq" and "noise" not in run(spec).to_dict()


def test_noise_is_part_of_the_store_key() -> None:
    from mmsim.experiments.executors import canonical
    from mmsim.experiments.run import RunSpec
    from mmsim.results.store import spec_hash

    a, b = RunSpec("lockstress"), RunSpec("lockstress", noise=True)
    assert spec_hash(canonical(a)) != spec_hash(canonical(b)) and "noise" not in canonical(a)


def test_compare_three_kernels_with_noise_has_a_spread(capsys: Cap) -> None:
    code = main(["compare", "lockstress", "-k", "v3.12", "-k", "v3.13", "-k", "v4.14", "--machine", "tiny", "-r", "3",
                 "--noise", "--executor", "serial", "--no-store", "--json"])
    d = json.loads(capsys.readouterr().out)
    m = next(m for m in d["metrics"] if m["metric"] == "lockstress.acquisitions_per_second")
    assert code == 0 and m["a"]["pct_stddev"] > 0 and all(c["b"]["pct_stddev"] > 0 for c in m["columns"])
