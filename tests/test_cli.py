"""The CLI as a user meets it: exit codes, one-line errors, text and JSON output.

``main(argv)`` is called in-process (stdout/stderr via capsys). Tests marked
``fake`` replace ``mmsim.experiments.{run,reproduce}`` with stand-ins so the
CLI's own behaviour is pinned independently of the model; the others run the
real library on the ``tiny`` machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mmsim.cli import main, parse_assignments
from mmsim.errors import UserError

Cap = pytest.CaptureFixture[str]

PRESETS = {
    "xeon-e5-2699v3-2s", "sgi-uv2000-512", "westmere-ex-4s", "cascadelake-optane-2s",
    "icelake-6338-2s", "xeon-phi-7295", "skylake-8170-2s", "cooperlake-8380h-4s", "host", "tiny",
    "haswell-ex-4s", "sapphirerapids-8480-2s", "tiny-pmem", "genoa-9654-2s",
}


def cli(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("mmsim: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


# -- parsing and usage errors (no library needed) -------------------------------------


def test_parse_assignments() -> None:
    assert parse_assignments("--set", ["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    assert parse_assignments("--set", None) == {}
    for bad in ("a", "=1", ""):
        with pytest.raises(UserError, match="--set"):
            parse_assignments("--set", [bad])


def test_malformed_set_and_param_name_the_option(capsys: Cap) -> None:
    assert_one_line_error(*cli(capsys, "run", "lockstress", "--set", "spinlock")[::2], "--set", "spinlock")
    assert_one_line_error(*cli(capsys, "run", "lockstress", "-p", "tasks")[::2], "-p", "tasks")


def test_usage_errors_are_one_line_exit_2(capsys: Cap) -> None:
    assert_one_line_error(*cli(capsys, "no-such-command")[::2], "no-such-command")
    assert_one_line_error(*cli(capsys, "run")[::2], "workload")
    assert_one_line_error(*cli(capsys, "run", "lockstress", "--seed", "-1")[::2], "--seed")
    assert_one_line_error(*cli(capsys, "machines", "--bogus")[::2], "--bogus")


def test_no_arguments_prints_help(capsys: Cap) -> None:
    code, out, _ = cli(capsys)
    assert code == 0 and "reproduce" in out and "machines" in out


def test_command_list_gives_each_description_whole(capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    # a docstring's line break inside its first paragraph used to end the row mid-sentence ("... the
    # benchmark's metrics," / "the profile and lock_stat." on a row of its own)
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = cli(capsys, "--help")
    rows = [ln for ln in out.splitlines() if " run " in ln and "one workload" in ln]
    assert code == 0 and len(rows) == 1 and "the profile and lock_stat" in rows[0], out


def test_a_commands_later_paragraphs_flow_as_one(capsys: Cap, monkeypatch: pytest.MonkeyPatch) -> None:
    # rich markup mode kept the docstring's line breaks in a command's later paragraphs too: reproduce's
    # "Exits 0 when ... outside its" / "band: that is reported ..." came out as two short lines
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = cli(capsys, "reproduce", "--help")
    rows = [ln for ln in out.splitlines() if "Exits 0 when the experiments ran" in ln]
    assert code == 0 and len(rows) == 1 and "not hidden behind an exit code" in rows[0], out


def test_python_dash_m_mmsim() -> None:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "mmsim", "run", "x", "--set", "nope"],
                       capture_output=True, text=True, check=False, env=env)
    assert p.returncode == 2 and p.stderr.startswith("mmsim: error: --set"), p.stderr


# -- fakes of the experiments layer ----------------------------------------------------

RUN_DICT: dict[str, Any] = {
    "workload": "lockstress", "machine": "tiny", "kernel": "v3.13", "params": {"tasks": 2}, "seed": 7,
    "metrics": {"lockstress.elapsed_seconds": 0.001},
    "perf": {"task-clock": 2.0, "context-switches": 0, "cpu-migrations": 0, "page-faults": 0,
             "cycles": 4_000_000, "instructions": 1_000_000, "cache-references": 10, "cache-misses": 1,
             "seconds-time-elapsed": 0.001},
    "vmstat": {}, "profile": [{"symbol": "think", "cycles": 10, "percent": 100.0, "instructions": 0}],
    "locks": {"lockstress": {"kind": "spinlock(queued)", "instances": 1, "acquisitions": 2, "contentions": 1,
                             "wait_ns_total": 50, "wait_ns_max": 50, "hold_ns_total": 400,
                             "hold_ns_max": 200}},
    "sim": {"events": 10, "wall_seconds": 0.01, "simulated_seconds": 0.001},
    "mode": "sim", "policies": {}, "command": "lockstress spinlock x2",
}


@dataclass
class FakeSpec:
    workload: str
    machine: str = "tiny"
    kernel: str = "v3.13"
    patches: tuple[str, ...] = ()
    policies: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    exact: bool = False


@dataclass
class FakeOutcome:
    ok: bool
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        band = [18, 72]
        check = {"metric": "speedup", "published": 36.2, "simulated": 40.0 if self.ok else 99.0,
                 "band": band, "ok": self.ok, "note": ""}
        return {"id": "split-pmd-ptl", "title": "split PMD ptl", "published": {"speedup": 36.2},
                "simulated": {"speedup": check["simulated"]}, "bands": {"speedup": band}, "ok": self.ok,
                "checks": [check], "arms": {}}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Install fake ``mmsim.experiments.run`` / ``.reproduce``; record their calls."""
    seen: dict[str, Any] = {}

    def run(spec: FakeSpec) -> Any:
        seen["spec"] = spec
        if spec.workload == "bad":
            raise UserError("workload", "bad", ["lockstress"])
        return types.SimpleNamespace(to_dict=lambda: dict(RUN_DICT))

    def reproduce(ids: list[str] | None, seed: int, store: Any = None, progress: Any = None) -> list[FakeOutcome]:
        seen["reproduce"] = (ids, seed)
        if ids and "nope" in ids:
            raise UserError("experiment", "nope", ["split-pmd-ptl"])
        return [FakeOutcome(ok=seed == 0, notes=["page_table_lock wait share 90% -> 1%"])]

    def run_repeated(spec: FakeSpec, runs: int = 1, store: Any = None, progress: Any = None) -> list[Any]:
        seen["store"] = store
        return [run(spec) for _ in range(runs)]

    run_mod = types.ModuleType("mmsim.experiments.run")
    run_mod.RunSpec = FakeSpec  # type: ignore[attr-defined]
    run_mod.run = run  # type: ignore[attr-defined]
    run_mod.run_repeated = run_repeated  # type: ignore[attr-defined]
    rep_mod = types.ModuleType("mmsim.experiments.reproduce")
    rep_mod.reproduce = reproduce  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "mmsim.experiments.run", run_mod)
    monkeypatch.setitem(sys.modules, "mmsim.experiments.reproduce", rep_mod)
    return seen


def test_run_builds_the_spec(capsys: Cap, fake: dict[str, Any]) -> None:
    code, out, _ = cli(capsys, "run", "lockstress", "--machine", "tiny", "--kernel", "v3.12",
                       "--patch", "e009bb30c8df", "--set", "spinlock=ticket", "-p", "tasks=2", "--seed", "7")
    assert code == 0
    assert fake["spec"] == FakeSpec("lockstress", "tiny", "v3.12", ("e009bb30c8df",),
                                    {"spinlock": "ticket"}, {"tasks": "2"}, 7)
    assert "\n Performance counter stats for 'lockstress spinlock x2':\n\n" in out  # perf's own header
    assert "lockstress.elapsed_seconds" in out and "sim: 10 events" in out


def test_run_leaves_defaults_to_the_library(capsys: Cap, fake: dict[str, Any]) -> None:
    assert cli(capsys, "run", "lockstress")[0] == 0
    assert fake["spec"] == FakeSpec("lockstress")


def test_run_json_is_to_dict(capsys: Cap, fake: dict[str, Any]) -> None:
    code, out, err = cli(capsys, "run", "lockstress", "--json")
    assert code == 0 and err == ""
    assert json.loads(out) == RUN_DICT
    assert out == json.dumps(RUN_DICT, indent=2) + "\n"


def test_library_user_error_is_one_line(capsys: Cap, fake: dict[str, Any]) -> None:
    assert_one_line_error(*cli(capsys, "run", "bad")[::2], "workload", "'bad'", "lockstress")


def test_reproduce_text_reports_verdict_and_notes(capsys: Cap, fake: dict[str, Any]) -> None:
    code, out, _ = cli(capsys, "reproduce", "split-pmd-ptl")
    assert code == 0 and fake["reproduce"] == (["split-pmd-ptl"], 0)
    assert "[PASS]" in out and "page_table_lock wait share 90% -> 1%" in out


def test_reproduce_outside_band_still_exits_0(capsys: Cap, fake: dict[str, Any]) -> None:
    code, out, _ = cli(capsys, "reproduce", "--seed", "3", "--json")
    assert code == 0 and fake["reproduce"] == (None, 3)
    (o,) = json.loads(out)
    assert list(o)[:5] == ["id", "title", "published", "simulated", "bands"] and o["ok"] is False


def test_reproduce_unknown_id(capsys: Cap, fake: dict[str, Any]) -> None:
    assert_one_line_error(*cli(capsys, "reproduce", "nope")[::2], "nope")


# -- against the real library ------------------------------------------------------------


def test_machines_lists_every_preset(capsys: Cap) -> None:
    code, out, _ = cli(capsys, "machines")
    assert code == 0
    names = {line.split()[0] for line in out.splitlines()[2:] if line.strip()}
    assert names == PRESETS


def test_machine_show_json(capsys: Cap) -> None:
    code, out, _ = cli(capsys, "machine", "show", "sgi-uv2000-512", "--json")
    assert code == 0
    d = json.loads(out)
    assert {"sockets", "nodes", "caches"} <= set(d)
    assert len(d["sockets"]) == 64 and sum(s["cores"] for s in d["sockets"]) == 512
    cpus = sum(s["cores"] * s["threads_per_core"] for s in d["sockets"])
    assert d.get("ncpus", d.get("cpus", cpus)) == cpus >= 512
    assert {c["name"] for c in d["caches"]} >= {"L1d", "L2", "L3"}


def test_machine_show_text(capsys: Cap) -> None:
    code, out, _ = cli(capsys, "machine", "show", "tiny")
    assert code == 0
    for needle in ("tiny:", "CPUs", "NUMA nodes:", "Caches:", "Cost model:", "line_xfer_socket_ns"):
        assert needle in out


def test_bad_machine_name(capsys: Cap) -> None:
    assert_one_line_error(*cli(capsys, "machine", "show", "no-such-box")[::2], "no-such-box")
    assert_one_line_error(*cli(capsys, "run", "lockstress", "--machine", "no-such-box")[::2], "no-such-box")


def test_unknown_param_is_named(capsys: Cap) -> None:
    assert_one_line_error(*cli(capsys, "run", "lockstress", "-p", "no_such_param=1")[::2], "no_such_param")


def _tiny_yaml(tmp_path: Path, **override: Any) -> Path:
    import yaml

    from mmsim.machine import get_machine, machine_to_dict

    d = machine_to_dict(get_machine("tiny"))
    d.update(override)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def test_malformed_machine_yaml_names_the_field(capsys: Cap, tmp_path: Path) -> None:
    bad = _tiny_yaml(tmp_path, freq_ghz=-1)
    assert_one_line_error(*cli(capsys, "run", "lockstress", "--machine", str(bad))[::2], "freq_ghz")
    assert_one_line_error(*cli(capsys, "machine", "show", str(bad))[::2], "freq_ghz")


def test_unparsable_yaml_is_one_line(capsys: Cap, tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: [unclosed\n  sockets: {\n")
    assert_one_line_error(*cli(capsys, "machine", "show", str(bad))[::2], "broken.yaml")


def test_run_lockstress_json_is_deterministic(capsys: Cap) -> None:
    argv = ("run", "lockstress", "--machine", "tiny", "-p", "tasks=2", "-p", "iterations=50", "--json")
    runs = []
    for _ in range(2):
        code, out, _ = cli(capsys, *argv)
        assert code == 0
        d = json.loads(out)
        d["sim"].pop("wall_seconds")
        runs.append(d)
    assert runs[0] == runs[1]
    assert list(runs[0])[:11] == [
        "workload", "machine", "kernel", "params", "seed", "metrics", "perf", "vmstat", "profile", "locks",
        "sim",
    ]
    assert runs[0]["locks"]["lockstress"]["acquisitions"] == 100


def test_run_lockstress_text(capsys: Cap) -> None:
    code, out, _ = cli(capsys, "run", "lockstress", "--machine", "tiny")
    assert code == 0
    for needle in ("Performance counter stats", "seconds time elapsed", "Lock statistics", "sim: "):
        assert needle in out


def test_catalogue_commands(capsys: Cap) -> None:
    code, out, _ = cli(capsys, "kernels")
    assert code == 0 and "v3.12" in out and "e009bb30c8df" in out
    code, out, _ = cli(capsys, "workloads")
    assert code == 0 and "thp_memscale" in out and "lockstress" in out
