"""Bad input never crashes: random and mutated command lines and YAML files
through the real CLI entry point (``mmsim.cli.main``), in-process.

Every case must end as either a successful run (exit 0) or a clean user
error: exit code 2, exactly one stderr line starting ``mmsim: error:``, no
traceback, and the results store untouched (absent stays absent, an existing
file keeps its bytes). Anything else -- an exception escaping ``main``, another
exit code, a second stderr line -- is a bug the fuzzer found.

Runs are kept tiny by the resource guard itself: ``$MMSIM_MAX_EVENTS`` is set
low, so a valid spec that would run long is refused as a user error. The
process and Dask executors are replaced by in-process serial ones (their own
tests are elsewhere), and ``mmsim native`` stops right before it would run the
workload on the host (everything before that, the validation, is real).

Example counts: the default suite runs ``FAST`` examples per test, 550 in
all (2,200 until session 24: 130 s of the default suite on session 24's VM), each test asserting it ran
exactly that many and saw both runs and errors; ``-m stress`` runs ``SLOW``, 11,000 in all (~12 min; not in
CI, whose 90 minutes the full-scale experiments need).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import string
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mmsim.cli as cli
import mmsim.experiments.executors as executors
from mmsim.cli import main
from mmsim.experiments import guard
from mmsim.kernels.catalog import KERNELS, PATCHES, POLICIES
from mmsim.machine import get_machine, list_machines, machine_to_dict
from mmsim.workloads.base import list_workloads

FAST = {"argv": 250, "machine_yaml": 75, "kernel_yaml": 125, "series_yaml": 100}
SLOW = {"argv": 5000, "machine_yaml": 1500, "kernel_yaml": 2500, "series_yaml": 2000}  # 11,000: -m stress
MAX_EVENTS = 20_000  # refuse (exit 2) anything longer than ~0.1 s of simulation

WORKLOADS = sorted(w.name for w in list_workloads())
PARAMS = {w.name: sorted(w.params) for w in list_workloads()}
# Small values that make each workload's run tiny; the fuzzer mutates from here.
TINY: dict[str, dict[str, str]] = {
    "lockstress": {"tasks": "2", "iterations": "50"},
    "lmbench/bw_unix": {"bytes": "256k", "repetitions": "1"},
    "will-it-scale/page_fault1": {"nr_task": "2", "memsize": "1m"},
    "thp_memscale": {"threads": "2", "bytes": "2m"},
    "pmbench": {"mapsize": "4", "setsize": "2", "duration": "0.005"},
}
for _w in WORKLOADS:
    if _w.startswith("vm-scalability/"):
        TINY[_w] = {"nr_task": "2", "size": "8m", "runtime": "1"}
MACHINES = [n for n, _ in list_machines() if n != "host"]
KERNEL_NAMES = sorted(KERNELS)
PATCH_IDS = sorted(PATCHES)
POLICY_VALUES = {n: list(p.allowed) if getattr(p, "allowed", None) else ["0", "1000"] for n, p in POLICIES.items()}

_chars = st.characters(codec="utf-8", exclude_characters="\x00")  # no surrogates, no NUL: argv cannot hold them
junk_text = st.text(_chars, max_size=12)
JUNK = ["", " ", "-1", "0", "1", "2", "3", "8", "1e3", "0x10", "1_0", "99999999999999999999999", "abc", "1m", "4k",
        "1g", "64t", "100%", "50%", "0%", "1.5", "nan", "inf", "-inf", "-0", "=", "1,2", "2,1,2", ",", "ü", "tiny",
        "v3.13", "always", "never", "on", "off", "true", "none", "--help", "-p", "/", ".", "..", "/dev/null",
        "/nonexistent/x.yaml"]
junk = st.one_of(st.sampled_from(JUNK), junk_text)


def mostly(valid: st.SearchStrategy[str], tenths: int = 8) -> st.SearchStrategy[str]:
    """``valid`` ``tenths``/10 of the time, else junk: most cases get far enough to test the later checks."""
    return st.integers(0, 9).flatmap(lambda i: valid if i < tenths else junk)


def value_for(name: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(POLICY_VALUES.get(name, ["1"])), junk)


# -- argv -----------------------------------------------------------------------------------


@st.composite
def param_pairs(draw: st.DrawFn, workload: str, sweep: bool = False) -> list[str]:
    base = dict(TINY.get(workload, {}))
    names = PARAMS.get(workload, [])
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3]))):
        k = draw(mostly(st.sampled_from(names)) if names else junk)
        base[k] = draw(junk)
    if sweep and base and draw(st.booleans()):
        k = draw(st.sampled_from(sorted(base)))
        base[k] = ",".join(draw(st.lists(st.sampled_from([base[k], "1", "2", "x", ""]), min_size=1, max_size=3)))
    out = []
    for k, v in base.items():
        if draw(st.integers(0, 19)) == 0:
            continue  # dropped
        out += ["-p", draw(st.sampled_from([f"{k}={v}", f"{k}{v}", f"{k}= {v}", f"={v}"])) if
                draw(st.integers(0, 9)) == 0 else f"{k}={v}"]
    return out


@st.composite
def set_pairs(draw: st.DrawFn) -> list[str]:
    out = []
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        k = draw(mostly(st.sampled_from(sorted(POLICIES))))
        out += ["--set", f"{k}={draw(mostly(st.sampled_from(POLICY_VALUES.get(k, ['1']))))}"]
    return out


def machine_arg(paths: dict[str, Path]) -> st.SearchStrategy[str]:
    return st.integers(0, 9).flatmap(lambda i: st.just("tiny") if i < 6 else st.sampled_from(MACHINES) if i < 8
                                     else st.sampled_from([str(p) for p in paths.values()]) if i < 9 else junk)


def kernel_arg(paths: dict[str, Path]) -> st.SearchStrategy[str]:
    return st.integers(0, 9).flatmap(
        lambda i: st.sampled_from(KERNEL_NAMES) if i < 5 else st.sampled_from([f"v3.13+{p[:12]}" for p in PATCH_IDS])
        if i < 7 else st.sampled_from([f"{k}+{p[:7]}+{p[:3]}" for k in KERNEL_NAMES[:3] for p in PATCH_IDS[:3]])
        if i < 8 else st.sampled_from([str(p) for p in paths.values()]) if i < 9 else junk)


NUM = mostly(st.sampled_from(["0", "1", "2", "5"]), 7)
RUN_OPTS = ["--seed", "--json"]
WORKFLOW_OPTS = ["--runs", "--seed", "--executor", "--workers", "--scheduler", "--store", "--no-store", "--fresh",
                 "--json", "--metric", "--max-events", "--max-memory"]
OPT_VALUES: dict[str, st.SearchStrategy[str]] = {
    "--seed": NUM,
    "--runs": st.sampled_from(["-1", "0", "1", "2", "x", "1.5"]),
    "--workers": NUM,
    "--executor": mostly(st.sampled_from(["serial", "process", "dask"])),
    "--scheduler": st.one_of(st.sampled_from(["tcp://127.0.0.1:1", "nowhere", "inproc://x"]), junk),
    "--metric": st.one_of(st.sampled_from(["lockstress.acquisitions_per_s", "perf-stat.page-faults", "nope"]), junk),
    "--max-events": st.sampled_from(["1", "1000", "1e3", "2e4", "20000", "x", "-1", "0", "", "1e400", "inf"]),
    "--max-memory": st.sampled_from(["1m", "1g", "8g", "x", "-1", "0", "", "1.5g", "1e", "nan", "inf", "1e400g"]),
    "--threshold": NUM,
    "--max-runs": st.sampled_from(["-1", "0", "1", "2", "x"]),
    "--max-stddev": NUM,
    "--max-spread": NUM,
}


@st.composite
def options(draw: st.DrawFn, names: list[str], store: Path) -> list[str]:
    out = []
    for name in draw(st.lists(st.sampled_from(names), max_size=draw(st.sampled_from([0, 1, 2, 3])))):
        if name in ("--json", "--no-store", "--fresh"):
            out.append(name)
        elif name == "--store":
            out += [name, draw(st.sampled_from([str(store), str(store.parent), "/proc/nope/x.duckdb",
                                                str(store.parent / "sub" / "s.duckdb"), ""]))]
        else:
            out += [name, draw(OPT_VALUES[name])]
    return out


@st.composite
def argv(draw: st.DrawFn, paths: dict[str, Path], store: Path) -> list[str]:
    cmd = draw(st.sampled_from(["run", "run", "run", "compare", "sweep", "sweep", "bisect", "machine show", "native",
                                "junk"]))
    w = draw(mostly(st.sampled_from(WORKLOADS), 9))
    if cmd == "run":
        a = ["run", w, "--machine", draw(machine_arg(paths)), *draw(param_pairs(w)), *draw(set_pairs())]
        if draw(st.booleans()):
            a += ["--kernel", draw(kernel_arg(paths))]
        if draw(st.booleans()):
            a += ["--patch", draw(st.one_of(st.sampled_from([p[:12] for p in PATCH_IDS]), junk))]
        a += draw(options(RUN_OPTS, store))
    elif cmd == "compare":
        ks = draw(st.lists(kernel_arg(paths), min_size=0, max_size=3))
        a = ["compare", w, *[x for k in ks for x in ("-k", k)], "-m", draw(machine_arg(paths)), "--runs", "2",
             *draw(param_pairs(w)), *draw(set_pairs()), *draw(options(WORKFLOW_OPTS, store))]
    elif cmd == "sweep":
        a = ["sweep", w, "-m", draw(machine_arg(paths)), *draw(param_pairs(w, sweep=True)), *draw(set_pairs()),
             *draw(options(WORKFLOW_OPTS, store))]
        if draw(st.booleans()):
            a += ["-k", draw(kernel_arg(paths))]
    elif cmd == "bisect":
        a = ["bisect", w, "-m", draw(machine_arg(paths)), "--runs", "1", *draw(param_pairs(w))]
        how = draw(st.sampled_from(["series", "goodbad", "both", "neither"]))
        if how in ("series", "both"):
            a += ["--series", draw(st.one_of(st.just(str(paths["series"])), junk))]
        if how in ("goodbad", "both"):
            a += ["--good", draw(kernel_arg(paths)), "--bad", draw(kernel_arg(paths))]
        a += draw(options([*WORKFLOW_OPTS, "--threshold", "--max-runs", "--max-stddev", "--max-spread"], store))
    elif cmd == "machine show":
        a = ["machine", "show", draw(machine_arg(paths))] + (["--json"] if draw(st.booleans()) else [])
    elif cmd == "native":
        a = ["native", w, *draw(param_pairs(w)), *draw(set_pairs())] + (["--warm"] if draw(st.booleans()) else [])
    else:
        a = draw(st.lists(junk, max_size=4))
    # a last random mutation of the whole line: drop, duplicate or replace a token
    op = draw(st.integers(0, 17))
    if a and op < 3:
        i = draw(st.integers(0, len(a) - 1))
        if op == 0:
            del a[i]
        elif op == 1:
            a.insert(i, a[i])
        else:
            a[i] = draw(junk)
    return a


# -- YAML -------------------------------------------------------------------------------------

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), junk,
                    st.builds(list), st.builds(dict), st.builds(lambda: [1, "a"]), st.builds(lambda: {"x": 1}))


def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _paths(v, (*prefix, i))


def _get(d: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        d = d[k]
    return d


@st.composite
def mutated(draw: st.DrawFn, doc: Any, n_max: int = 3) -> Any:
    """``doc`` with 1..n_max mutations: a value replaced (scalar, other type, scaled number), a key dropped or
    added, a list emptied or extended."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, n_max))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        if not path:
            if draw(st.integers(0, 9)) == 0:
                return draw(SCALARS)
            continue
        parent, key = _get(doc, path[:-1]), path[-1]
        old = parent[key]
        op = draw(st.integers(0, 5))
        if op == 0:
            del parent[key]
        elif op == 1 and isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[key] = old * draw(st.sampled_from([-1, 0, 0.5, 2, 1000, 1e9]))
        elif op == 2 and isinstance(parent, dict):
            parent[draw(st.one_of(junk, st.sampled_from(sorted(map(str, parent)))))] = draw(SCALARS)
        elif op == 3 and isinstance(old, list):
            parent[key] = [] if draw(st.booleans()) else [*old, *(old[:1] * draw(st.integers(1, 3)))]
        else:
            parent[key] = draw(SCALARS)
    return doc


_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@functools.cache
def _machine_docs() -> dict[str, Any]:
    return {n: machine_to_dict(get_machine(n)) for n in MACHINES}


@st.composite
def yaml_text(draw: st.DrawFn, doc: Any) -> str:
    """The mutated document as YAML, sometimes garbled as text (cut, bytes flipped)."""
    text = yaml.dump(draw(mutated(doc)), Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    op = draw(st.integers(0, 7))
    if op == 0:
        text = text[: draw(st.integers(0, len(text)))]
    elif op == 1:
        i = draw(st.integers(0, max(0, len(text) - 1)))
        bits = ["\t", ":", "- ", "{", "&a", "*a", "!!python/object:os.system", "\n  "]
        text = text[:i] + draw(st.sampled_from(bits)) + text[i:]
    return text


# -- the check ----------------------------------------------------------------------------------


_get_command = typer.main.get_command


class ReachedNativeRun(Exception):
    """mmsim native got past every check: a valid native command (not run)."""


def _serial(specs: Any, *args: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    for i, s in enumerate(specs):
        yield i, executors._unwrap(executors._work(s))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    import mmsim.native.safety as safety

    store = tmp_path / "store" / "results.duckdb"
    monkeypatch.setenv("MMSIM_RESULTS", str(store))
    monkeypatch.setenv(guard.ENV_EVENTS, str(MAX_EVENTS))
    monkeypatch.delenv(guard.ENV_FORCE, raising=False)
    monkeypatch.setattr(executors, "_process", lambda specs, workers: _serial(specs))
    monkeypatch.setattr(executors, "_dask", lambda specs, workers, scheduler: _serial(specs))

    def no_native(*a: Any, **k: Any) -> Any:
        raise ReachedNativeRun

    monkeypatch.setattr(safety, "terminate_as_exception", no_native)
    # the click command built once, not per call (55 ms each: typer re-reads every signature); same command
    command = typer.main.get_command(cli.app)
    monkeypatch.setattr(typer.main, "get_command", lambda app: command if app is cli.app else _get_command(app))
    files = tmp_path / "in"
    files.mkdir()
    paths = {"machine": files / "m.yaml", "kernel": files / "k.yaml", "series": files / "s.yaml",
             "nomachine": files / "absent.yaml"}
    paths["machine"].write_text(yaml.safe_dump(machine_to_dict(get_machine("tiny"))))
    paths["kernel"].write_text(yaml.safe_dump({"name": "mine", "base": "v3.13", "patches": [], "policies": {}}))
    paths["series"].write_text(yaml.safe_dump({"base": "v3.12", "patches": [PATCH_IDS[0]]}))
    yield {"store": store, "paths": paths, "tmp": tmp_path}


COUNTS = {"ok": 0, "errors": 0}  # CLI calls that ran / ended in a user error, over the session


def _snapshot(store: Path) -> tuple[bool, str]:
    return (store.exists(), hashlib.sha256(store.read_bytes()).hexdigest() if store.is_file() else "")


def check_cli(a: list[str], store: Path, capsys: pytest.CaptureFixture[str]) -> int:
    """Run ``mmsim *a`` in-process; assert it is a success or a clean user error; return the exit code."""
    before = _snapshot(store)
    capsys.readouterr()
    try:
        rc = main(a)
    except ReachedNativeRun:
        COUNTS["ok"] += 1
        return 0
    _out, err = capsys.readouterr()
    if rc == 0:
        COUNTS["ok"] += 1
        return rc
    COUNTS["errors"] += 1
    assert rc == 2, f"mmsim {a!r}: exit {rc}\n{err}"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mmsim: error: "), f"mmsim {a!r}: stderr {err!r}"
    assert "Traceback" not in err
    # the one documented exception (docs/cli.md): --metric names a metric of the runs, so it is checked after
    # them, and the valid runs are kept
    if not lines[0].startswith("mmsim: error: --metric:"):
        assert _snapshot(store) == before, f"mmsim {a!r}: a user error changed the results store"
    return rc


def _settings(n: int) -> Callable[[Any], Any]:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


def _argv_case(env: dict[str, Any], capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    a = data.draw(argv(env["paths"], env["store"]), label="argv")
    check_cli(a, env["store"], capsys)


def _machine_case(env: dict[str, Any], capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    docs = _machine_docs()
    name = data.draw(st.sampled_from(["tiny", "tiny", *MACHINES]), label="preset")
    p = env["paths"]["machine"]
    p.write_text(data.draw(yaml_text(docs[name]), label="yaml"))
    check_cli(["machine", "show", str(p)], env["store"], capsys)
    if name == "tiny":  # a run on it, tiny by the event limit
        check_cli(["run", "lockstress", "-m", str(p), "-p", "tasks=2", "-p", "iterations=20"], env["store"], capsys)


def _kernel_case(env: dict[str, Any], capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    doc = {"name": "mine", "base": data.draw(st.sampled_from(KERNEL_NAMES)), "description": "fuzz",
           "patches": data.draw(st.lists(st.sampled_from(PATCH_IDS), max_size=2)),
           "policies": {k: data.draw(st.sampled_from(POLICY_VALUES[k]))
                        for k in data.draw(st.lists(st.sampled_from(sorted(POLICIES)), max_size=3))}}
    p = env["paths"]["kernel"]
    p.write_text(data.draw(yaml_text(doc), label="yaml"))
    check_cli(["run", "lockstress", "-k", str(p), "-p", "tasks=2", "-p", "iterations=20"], env["store"], capsys)


def _series_case(env: dict[str, Any], capsys: pytest.CaptureFixture[str], data: st.DataObject) -> None:
    doc = {"base": data.draw(st.sampled_from(KERNEL_NAMES)), "description": "fuzz",
           "patches": data.draw(st.lists(st.sampled_from([p[:12] for p in PATCH_IDS]), min_size=1, max_size=3))}
    p = env["paths"]["series"]
    p.write_text(data.draw(yaml_text(doc), label="yaml"))
    store = ["--no-store"] if data.draw(st.integers(0, 3), label="no store") else []
    check_cli(["bisect", "lockstress", "--series", str(p), "--runs", "1", "--executor", "serial", "-p", "tasks=2",
               "-p", "iterations=20", *store], env["store"], capsys)


CASES = {"argv": _argv_case, "machine_yaml": _machine_case, "kernel_yaml": _kernel_case,
         "series_yaml": _series_case}


def _fuzz(kind: str, n: int, env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    seen = {"examples": 0, "ok": 0, "errors": 0}

    @_settings(n)
    @given(data=st.data())
    def inner(data: st.DataObject) -> None:
        before = COUNTS.copy()
        CASES[kind](env, capsys, data)
        seen["examples"] += 1
        seen["ok"] += COUNTS["ok"] - before["ok"]
        seen["errors"] += COUNTS["errors"] - before["errors"]

    inner()
    # the count the docs report; and a fuzzer that only ever hits errors (or only runs) tests half the contract
    assert seen["examples"] == n, seen
    assert seen["ok"] > 0 and seen["errors"] > 0, seen
    print(f"{kind}: {seen}")


@pytest.mark.parametrize("kind", sorted(CASES))
def test_fuzz_cli(kind: str, env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    _fuzz(kind, FAST[kind], env, capsys)


@pytest.mark.stress
@pytest.mark.parametrize("kind", sorted(CASES))
def test_fuzz_cli_many(kind: str, env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    _fuzz(kind, SLOW[kind], env, capsys)


# -- a few fixed cases the fuzzer found (kept as plain regressions) ------------------------------------------


def test_printable_junk_in_every_position(env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    for w in WORKLOADS:
        for tok in ("", "=", "-1", "x", string.punctuation):
            assert check_cli(["run", w, "-m", "tiny", "-p", f"{tok}={tok}"], env["store"], capsys) == 2


@pytest.mark.parametrize("argv_", [
    # pmbench memhog on a machine of DRAM nodes only: the simulated kernel ran out of memory (MemoryError)
    ["run", "pmbench", "-p", "memhog=100", "-p", "duration=0.01"],
    # a sweep whose second point fails the workload's set-up check: the first point used to be stored
    ["sweep", "lockstress", "-p", "tasks=2,100", "-p", "iterations=10", "--executor", "serial"],
    # a mistyped core count: per-CPU state for 40 million CPUs (MemoryError)
    ["run", "lockstress", "-m", "BIG"],
    # a series file with a non-string key (sorted() of mixed key types: TypeError)
    ["bisect", "lockstress", "--series", "MIXED", "--runs", "1"],
    # a kernel file with an unknown key that is not a string, next to one that is (sorted(): TypeError)
    ["run", "lockstress", "-k", "KMIXED"],
    # a machine file whose node mem_type is a list (set membership of an unhashable value: TypeError)
    ["machine", "show", "MEMTYPE"],
    # a kernel or series file that is not UTF-8 (UnicodeDecodeError)
    ["run", "lockstress", "-k", "BINARY"],
    ["bisect", "lockstress", "--series", "BINARY"],
    # a kernel string longer than a file name may be (Path.is_file: OSError ENAMETOOLONG); a bisect over the
    # whole catalogue builds one of 40 patches (session 8's CI)
    ["run", "lockstress", "-k", "v3.12+" + "+".join(["nosuchpatch"] * 30)],
    ["run", "lockstress", "-k", "v3.12+" + "x" * 300],
])
def test_found_by_the_fuzzer(argv_: list[str], env: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    tmp = env["tmp"]
    d = machine_to_dict(get_machine("tiny"))
    for s in d["sockets"]:
        s["cores"] = 10**7
    files = {"BIG": tmp / "big.yaml", "MIXED": tmp / "mixed.yaml", "BINARY": tmp / "binary.yaml",
             "KMIXED": tmp / "kmixed.yaml"}
    files["KMIXED"].write_text("base: v3.13\nnull: 1\nx: 2\n")
    files["MEMTYPE"] = tmp / "memtype.yaml"
    m = machine_to_dict(get_machine("tiny"))
    m["nodes"][0]["mem_type"] = []
    files["MEMTYPE"].write_text(yaml.safe_dump(m))
    files["BIG"].write_text(yaml.safe_dump(d))
    files["MIXED"].write_text(f"base: v3.12\npatches: [{PATCH_IDS[0]}]\n1: 2\n")
    files["BINARY"].write_bytes(b"\xff\xfe\x00base")
    a = [str(files[x]) if x in files else x for x in argv_]
    assert check_cli(a, env["store"], capsys) == 2
    assert not env["store"].exists()
