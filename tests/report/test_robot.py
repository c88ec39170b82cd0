"""compare --format robot / mmtests: the kernel test robot's email and mmtests' compare-kernels rows."""

from __future__ import annotations

from typing import Any

import pytest

from mmsim.cli import main
from mmsim.report.robot import mmtests_table, pair, robot_email, robot_emails

QSPIN = "a33fda35e3a7"


def _metric(name: str, a: list[float], cols: list[tuple[str, list[float], float, bool, str | None]],
            bench: bool = True) -> dict[str, Any]:
    def summ(v: list[float]) -> dict[str, Any]:
        return {"n": len(v), "mean": sum(v) / len(v), "pct_stddev": 0.0, "values": v}

    return {"metric": name, "benchmark": bench, "a": summ(a),
            "columns": [{"kernel": k, "b": summ(v), "pct_change": pct, "lkp_changed": sig, "welch_p": 0.01,
                         "significant": sig, "direction": None, "verdict": verdict}
                        for k, v, pct, sig, verdict in cols]}


def _dict() -> dict[str, Any]:
    """A 3-kernel compare: v3.12 (base), v3.12+QSPIN (one commit: throughput +100%), v3.13 (no change)."""
    arms = [{"label": "v3.12", "kernel": "v3.12", "patches": [], "policies": {}},
            {"label": f"v3.12+{QSPIN}", "kernel": f"v3.12+{QSPIN}", "patches": [QSPIN], "policies": {}},
            {"label": "v3.13", "kernel": "v3.13", "patches": ["x1", "x2"], "policies": {}}]
    return {"kind": "compare", "workload": "vm-scalability/anon-w-seq", "machine": "tiny",
            "params": {"nr_task": "2", "size": "16m"}, "runs": 2, "seeds": [0, 1], "arms": arms,
            "culprits": [f'commit {QSPIN} ("...")', "2 patches"], "executed": 6, "verdicts": [],
            "metrics": [
                _metric("vm-scalability.throughput", [100.0, 100.0],
                        [("b", [200.0, 200.0], 100.0, True, "improvement"), ("c", [100.0, 100.0], 0.0, False, None)]),
                _metric("vm-scalability.time.elapsed_time", [10.0, 30.0],
                        [("b", [5.0, 15.0], -50.0, False, None), ("c", [10.0, 30.0], 0.0, False, None)]),
            ]}


def test_pair_takes_one_column_out() -> None:
    p = pair(_dict(), 2)
    assert [a["kernel"] for a in p["arms"]] == ["v3.12", "v3.13"] and p["culprit"] == "2 patches"
    assert p["metrics"][0]["b"]["values"] == [100.0, 100.0] and "columns" not in p["metrics"][0]
    with pytest.raises(IndexError):
        pair(_dict(), 3)


def test_robot_email_block() -> None:
    text = robot_email(pair(_dict(), 1))
    lines = text.splitlines()
    assert lines[0] == "Subject: [locking/qspinlock] a33fda35e3: vm-scalability.throughput 100.0% improvement"
    i = lines.index("FYI, we noticed a 100.0% improvement of vm-scalability.throughput due to commit:")
    assert lines[i + 1:i + 10] == [
        "", "",
        f'commit: {QSPIN} ("locking/qspinlock: Introduce a simple generic 4-byte queued spinlock")', "",
        "in testcase: vm-scalability",
        "on test machine: 8 threads 2 sockets test machine: 2 sockets x 2 cores x 2 threads = 8 CPUs at 1 GHz "
        "(1 ns = 1 cycle) with 2G memory",
        "with following parameters:", "",
        "\tnr_task: 2"]
    assert lines[i + 10:i + 12] == ["\tsize: 16m", "\ttest: anon-w-seq"]
    j = lines.index("nr_task/size/tbox_group/test/testcase:")
    assert lines[j + 1] == "  2/16m/tiny/anon-w-seq/vm-scalability"
    assert lines[j + 3:j + 6] == ["commit: ", "  v3.12", f'  {QSPIN} ("locking/qspinlock: Introduce a simple '
                                                         'generic 4-byte queued spinlock")']
    assert "+100.0%" in text and "%stddev     %change         %stddev" in text


def test_robot_sends_nothing_without_a_significant_change() -> None:
    assert robot_email(pair(_dict(), 2)) == ("no significant change of a benchmark metric between v3.12 and "
                                             "v3.13: the robot sends no email")
    assert robot_emails(_dict()).count("Greeting,") == 1


def test_regression_keeps_its_sign() -> None:
    d = pair(_dict(), 1)
    d["metrics"][0] |= {"pct_change": -33.4, "verdict": "regression"}
    assert "FYI, we noticed a -33.4% regression of vm-scalability.throughput due to commit:" in robot_email(d)


def test_mmtests_rows_and_gains() -> None:
    lines = mmtests_table(_dict()).splitlines()
    assert lines[1].split() == ["v3.12", f"v3.12+{QSPIN}", "v3.13"]
    rows = {tuple(ln.split()[:2]): ln for ln in lines[2:]}
    # throughput (higher is better): +100% marked significant; elapsed (lower is better): 50% gain, not marked
    assert rows[("Amean", "vm-scalability.throughput")].split()[2:] == [
        "100.00", "(", "0.00%)", "200.00", "*", "100.00%*", "100.00", "(", "0.00%)"]
    assert rows[("Amean", "vm-scalability.time.elapsed_time")].split()[2:] == [
        "20.00", "(", "0.00%)", "10.00", "(", "50.00%)", "20.00", "(", "0.00%)"]
    # Hmean of 10 and 30 = 15; Stddev: lower is better, so halving it is a +50% gain
    assert rows[("Hmean", "vm-scalability.time.elapsed_time")].split()[2] == "15.00"
    assert rows[("Stddev", "vm-scalability.time.elapsed_time")].split()[5:8] == ["7.07", "(", "50.00%)"]
    assert [ln.split()[0] for ln in lines[2:8]] == ["Min", "Amean", "Hmean", "Stddev", "CoeffVar", "Max"]


def test_compare_format_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    # 8 tasks on tiny: the qspinlock is 3.9 % slower than the ticket lock (8.2 % from session 29 to 34: its xchg_tail
    # RMW and the queue head's copy of the word cost more than the short storms of tiny's inclusive L3; since session
    # 35 a waiter sees a release or its MCS node store after the PAUSE it is in, which moves the order in which the
    # queue head's read and the holder's unlock meet the word; docs/guide.md §2)
    base = ["compare", "lockstress", "-k", "v3.12", "-k", f"v3.12+{QSPIN}", "-p", "tasks=8", "-p",
            "iterations=100", "-r", "2", "--executor", "serial", "--no-store", "--no-progress"]
    assert main([*base, "--format", "robot"]) == 0
    out = capsys.readouterr().out
    assert "FYI, we noticed a -3.9% regression of lockstress.acquisitions_per_second" in out
    assert main([*base, "--format", "mmtests"]) == 0
    assert "Amean     lockstress.acquisitions_per_second" in capsys.readouterr().out
    assert main([*base, "--format", "csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--format" in err and "lkp, robot, mmtests" in err
