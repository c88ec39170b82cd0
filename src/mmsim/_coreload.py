"""Loading the optional compiled core (:mod:`mmsim.corebuild` builds it): which modules, where their build
for the current sources is, and the import hook that loads them from there. Imported by ``mmsim/__init__.py``
before anything else, so it stays small (no subprocess, no build)."""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# The compiled modules, relative to the package. Each must compile under mypyc unchanged in behaviour: no
# class of theirs subclassed or given attributes or methods from outside. SimulationError lives in
# mmsim.errors for that reason; engine/cpu.py is left out because experiments/noise.py replaces a
# Scheduler's spawn method, locks/rwsem.py because mm/hugetlb.py subclasses RwSem. Chosen by host time
# (docs/performance.md, session 38).
MODULES = ("engine/core.py", "metrics/counters.py", "metrics/sampling.py", "locks/base.py", "locks/spinlock.py",
           "mm/mempolicy.py", "mm/mmap.py")
PKG = Path(__file__).resolve().parent


def _cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mmsim"


def _names() -> dict[str, str]:
    """Module name -> its path relative to the package root's parent (``mmsim/locks/base``)."""
    return {"mmsim." + m[:-3].replace("/", "."): "mmsim/" + m[:-3] for m in MODULES}


def tag() -> str:
    """The build's key: the compiled modules' sources and the interpreter's extension ABI."""
    h = hashlib.sha256()
    h.update((sysconfig.get_config_var("EXT_SUFFIX") or "").encode())
    h.update(sys.version.encode())
    for m in MODULES:
        h.update(m.encode())
        h.update((PKG / m).read_bytes())
    return h.hexdigest()[:16]


def core_dir() -> Path:
    return _cache() / f"core-{tag()}"


def built() -> Path | None:
    """The build for the current sources, or None."""
    d = core_dir()
    return d if (d / "manifest.json").is_file() else None


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules in one build directory (and nothing else)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        self.names = _names()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        rel = self.names.get(fullname)
        if rel is None:
            return None
        so = self.root / (rel + self.suffix)
        return importlib.util.spec_from_file_location(fullname, so) if so.is_file() else None


MODE = "pure"  # what install() chose: "compiled" or "pure"


def install() -> str:
    """Load the compiled modules from the current build, if any and not ``MMSIM_CORE=pure``; must run
    before any of them is imported (``mmsim/__init__.py``). Returns the mode: ``compiled`` or ``pure``."""
    global MODE
    if os.environ.get("MMSIM_CORE", "").lower() == "pure" or any(
            isinstance(f, _Finder) for f in sys.meta_path):
        return MODE
    try:
        d = built()
    except OSError:  # a source unreadable: run as it is
        d = None
    if d is None or any(n in sys.modules for n in _names()):
        return MODE
    sys.path.append(str(d))  # the shared library of the group (a top-level module mypyc names by hash)
    sys.meta_path.insert(0, _Finder(d))
    MODE = "compiled"
    return MODE
