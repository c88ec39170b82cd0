"""``mmsim native`` as a user meets it: JSON like ``mmsim run``, one-line errors, exit codes."""

from __future__ import annotations

import json

import pytest

from mmsim.cli import main
from mmsim.native import sysinfo

Cap = pytest.CaptureFixture[str]

RUN_KEYS = {"workload", "machine", "kernel", "params", "seed", "metrics", "perf", "vmstat", "profile", "locks",
            "sim", "mode", "policies", "command"}


def test_native_json_has_the_run_shape(capsys: Cap) -> None:
    code = main(["native", "vm-scalability/anon-w-seq", "-p", "nr_task=1", "-p", "size=16m", "--set", "thp=never",
                 "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    assert RUN_KEYS <= set(d)
    assert d["mode"] == "native"
    assert d["params"] == {"nr_task": "1", "runtime": 300, "size": 16 << 20}
    assert d["metrics"]["vm-scalability.throughput"] > 0
    assert {"user_seconds", "system_seconds", "minor_faults", "voluntary_ctx_switches"} <= set(d["rusage"])
    assert d["kernel"] == sysinfo.kernel_release()


def test_native_text(capsys: Cap) -> None:
    code = main(["native", "lmbench/bw_unix", "-p", "bytes=1m"])
    out = capsys.readouterr().out
    assert code == 0
    assert "lmbench3.AF_UNIX.sock.stream.bandwidth.MB/sec" in out
    assert "/proc/vmstat deltas" in out and "getrusage" in out


@pytest.mark.parametrize("argv, needle", [
    (["native", "nope"], "workload"),
    (["native", "vm-scalability/anon-w-seq", "-p", "size=huge"], "-p size"),
    (["native", "vm-scalability/anon-w-seq", "-p", "size=100000g"], "MemAvailable"),
    (["native", "vm-scalability/anon-w-seq", "--set", "thp=sometimes"], "--set thp"),
    (["native", "vm-scalability/anon-w-seq", "--set", "numa_balancing=on"], "--set"),
    (["native", "vm-scalability/anon-w-seq", "-p", "nr_task"], "-p/--param"),
    (["validate", "--size", "lots"], "--size"),
])
def test_bad_input_one_line_exit_2(capsys: Cap, argv: list[str], needle: str) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("mmsim: error:") and err.count("\n") == 1 and needle in err
