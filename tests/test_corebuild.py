"""The optional compiled core (mmsim.corebuild, mmsim._coreload): the same results as pure Python, to the
bit, and never a stale build."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mmsim import _coreload, corebuild

# Small runs through every compiled module's paths: ticket-lock storms on the 1,024-CPU UV (the per-socket
# sums), queued spinlocks and the PCP zone lock, the rwsem and VMA-lock fault paths, the mutex and rwsem
# torture, hugetlb, pmbench's paging, the fast mode's windows and skips (the first two), --noise and --exact.
RUNS = (
    "thp_memscale --machine sgi-uv2000-512 --kernel v3.12 -p threads=64 -p bytes=4m",
    "thp_memscale --machine xeon-e5-2699v3-2s --kernel v3.13 -p threads=16 -p bytes=16m --set thp=never --noise",
    "thp_memscale --machine tiny --kernel v3.12 -p threads=4 -p bytes=8m --exact",
    "will-it-scale/page_fault3 --machine skylake-8170-2s --kernel v6.6 -p nr_task=8 -p memsize=4m",
    "lmbench/bw_unix --machine icelake-6338-2s --kernel v6.6",
    "locktorture --machine tiny --kernel v6.6",
    "vm-scalability/anon-w-seq-hugetlb --machine tiny --kernel v5.7",
    "pmbench --machine tiny --kernel v5.4",
    "lockstress --machine tiny --kernel v4.14",
)


def _env(mode: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MMSIM_CORE"}
    if mode == "pure":
        env["MMSIM_CORE"] = "pure"
    env["PYTHONPATH"] = str(Path(_coreload.PKG).parent)
    return env


def _py(code: str, mode: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], env=_env(mode), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_pure_when_asked_or_not_built() -> None:
    """MMSIM_CORE=pure loads the .py files whether or not a build exists, and --status says so."""
    code = "import mmsim, mmsim.locks.base as b, mmsim._coreload as c; print(c.MODE, b.__file__)"
    mode, path = _py(code, "pure").split()
    assert mode == "pure" and path.endswith("locks/base.py")
    r = subprocess.run([sys.executable, "-m", "mmsim.corebuild", "--status"], env=_env("pure"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "pure Python (MMSIM_CORE=pure)"


def test_an_edited_module_is_not_loaded_from_an_old_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build directory is keyed by the compiled modules' sources: one changed byte, another key, no build."""
    for m in _coreload.MODULES:
        (tmp_path / m).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(_coreload.PKG) / m, tmp_path / m)
    monkeypatch.setattr(_coreload, "PKG", tmp_path)
    t0 = _coreload.tag()
    assert t0 == _coreload.tag()  # a pure function of the sources
    src = tmp_path / _coreload.MODULES[-1]
    src.write_text(src.read_text() + "\n# edited\n")
    t1 = _coreload.tag()
    assert t1 != t0
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache" / "mmsim" / f"core-{t0}").mkdir(parents=True)
    (tmp_path / "cache" / "mmsim" / f"core-{t0}" / "manifest.json").write_text("{}")
    assert _coreload.built() is None  # the old sources' build is there, the edited ones' is not
    finder = _coreload._Finder(tmp_path / "cache" / "mmsim" / f"core-{t0}")
    assert finder.find_spec("mmsim.locks.base", None) is None  # no extension file there: not taken
    assert finder.find_spec("mmsim.mm.memory", None) is None  # never a module outside MODULES


def test_compiled_core_gives_the_same_results() -> None:
    """Every run of RUNS gives the same JSON in both modes but for its host wall time, and the compiled mode
    did load the extensions (else the comparison would be pure against pure)."""
    why = corebuild._why_not()
    if _coreload.built() is None and why:
        pytest.skip(f"the compiled core cannot be built here: {why}")
    assert corebuild.build(quiet=True) is not None
    code = "import mmsim, mmsim.locks.base as b, mmsim.engine.core as e, mmsim._coreload as c; " \
           "print(c.MODE, b.__file__, e.__file__)"
    mode, *files = _py(code, "auto").split()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    assert mode == "compiled" and all(f.endswith(suffix) for f in files), files
    for run in RUNS:
        out = {}
        for mode in ("pure", "auto"):
            r = subprocess.run([sys.executable, "-m", "mmsim", "run", *run.split(), "--json", "--no-store"],
                               env=_env(mode), capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, (run, mode, r.stderr[-2000:])
            d = json.loads(r.stdout)
            d["sim"].pop("wall_seconds")
            out[mode] = d
        assert out["pure"] == out["auto"], run
