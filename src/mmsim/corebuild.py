"""The optional compiled core: the simulator's hottest modules compiled with mypyc.

``python -m mmsim.corebuild`` compiles :data:`MODULES` (the event loop, the counters, the fast mode, the
cache-line and spinlock models, the node check's path: about half of a contended run's host time) with mypyc
into ``$XDG_CACHE_HOME/mmsim/core-<tag>/`` (default ``~/.cache/mmsim``), ``<tag>`` a hash of those modules'
sources and of the Python ABI. ``import mmsim`` (:func:`mmsim._coreload.install`) then loads them from there
instead of the ``.py`` files, unless ``MMSIM_CORE=pure``. An edited module changes the tag, so a stale build
is never used: the run is pure Python until the next build. The results are the same to the bit either way
(the same float operations in the same order; ``tests/test_corebuild.py`` compares the JSON of both modes);
only the host time differs (docs/performance.md, session 38).

``./bin/mmsim`` and ``./bin/test`` build it once, when they install the checkout into ``.venv``; without a C
compiler, Python headers or mypyc the build is skipped with one line and everything runs as pure Python.

    python -m mmsim.corebuild            # build for the current sources (a no-op if built)
    python -m mmsim.corebuild --status   # which mode `import mmsim` uses, and why
    MMSIM_CORE=pure mmsim run ...        # pure Python even with a build
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from mmsim._coreload import MODULES, PKG, _cache, built, core_dir

BUILD_TIMEOUT_S = 900
KEEP_BUILDS = 3  # core-* directories kept in the cache (older ones are removed after a build)


def _why_not() -> str | None:
    """Why a build cannot run here, or None."""
    import shutil

    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        return "no C compiler (cc)"
    inc = sysconfig.get_paths().get("include")
    if not inc or not (Path(inc) / "Python.h").is_file():
        return "no Python headers (Python.h)"
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (it comes with mypy, a [dev] dependency)"
    return None


def build(quiet: bool = False) -> Path | None:
    """Compile :data:`MODULES` for the current sources; the build directory, or None (the reason on stderr)."""
    import json
    import shutil
    import subprocess
    import tempfile
    import time

    d = built()
    if d is not None:
        return d
    why = _why_not()
    if why:
        print(f"mmsim: the compiled core is not built ({why}); everything runs as pure Python", file=sys.stderr)
        return None
    final = core_dir()
    cache = _cache()
    cache.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if not quiet:
        print(f"mmsim: compiling the optional core with mypyc ({len(MODULES)} modules, ~1 min; "
              "MMSIM_CORE=pure runs without it) ...", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        work = Path(tmp) / "src"
        shutil.copytree(PKG, work / "mmsim", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        try:
            r = subprocess.run([sys.executable, "-m", "mypyc", *("mmsim/" + m for m in MODULES)], cwd=work,
                               capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            print(f"mmsim: the compiled core did not build ({e}); everything runs as pure Python", file=sys.stderr)
            return None
        if r.returncode != 0:
            last = (r.stdout + r.stderr).strip().splitlines()[-1:] or ["?"]
            print(f"mmsim: the compiled core did not build (mypyc: {last[0][:200]}); everything runs as pure "
                  "Python", file=sys.stderr)
            return None
        out = Path(tmp) / "out"
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        for so in work.rglob("*" + suffix):
            dst = out / so.relative_to(work)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(so, dst)
        (out / "manifest.json").write_text(json.dumps({
            "tag": final.name[5:], "modules": list(MODULES), "python": sys.version,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.time() - t0, 1)}, indent=1) + "\n")
        if final.is_dir() and built() is None:  # left half-made by a build that was killed: not used, replaced
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(out, final)  # atomic: a concurrent build that finished first keeps its directory
        except OSError:
            if built() is None:
                raise
    _prune(final)
    if not quiet:
        print(f"mmsim: compiled core built in {time.time() - t0:.0f} s: {final}", file=sys.stderr)
    return final


def _prune(keep: Path) -> None:
    """Remove all but the newest :data:`KEEP_BUILDS` builds (older sources' builds are never used again)."""
    import shutil

    old = sorted((p for p in _cache().glob("core-*") if p != keep and p.is_dir()),
                 key=lambda p: p.stat().st_mtime, reverse=True)
    for p in old[KEEP_BUILDS - 1:]:
        shutil.rmtree(p, ignore_errors=True)


def status() -> str:
    d = built()
    env = os.environ.get("MMSIM_CORE", "")
    if env.lower() == "pure":
        return "pure Python (MMSIM_CORE=pure)"
    if d is None:
        why = _why_not()
        return ("pure Python: no compiled core for the current sources (`python -m mmsim.corebuild` builds it)"
                + (f"; it cannot be built here: {why}" if why else ""))
    return f"compiled core: {d}"


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m mmsim.corebuild", description=__doc__.split("\n\n")[0],
                                 epilog="examples:\n  python -m mmsim.corebuild\n  python -m mmsim.corebuild "
                                        "--status", formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--status", action="store_true", help="print which mode `import mmsim` uses, build nothing")
    ap.add_argument("--bootstrap", action="store_true",
                    help="as run by bin/_bootstrap.sh: skipped under MMSIM_CORE=pure, never fails")
    a = ap.parse_args(argv)
    if a.status:
        print(status())
        return 0
    if a.bootstrap and os.environ.get("MMSIM_CORE", "").lower() == "pure":
        return 0
    try:
        d = build()
    except Exception as e:  # the bootstrap must not fail over an optional speed-up
        if not a.bootstrap:
            raise
        print(f"mmsim: the compiled core did not build ({type(e).__name__}: {e}); everything runs as pure Python",
              file=sys.stderr)
        return 0
    return 0 if d is not None or a.bootstrap else 1


if __name__ == "__main__":
    sys.exit(main())
