"""mmsim: a simulator of Linux kernel memory-management performance on many-core NUMA machines.

The Python API (``mmsim.__all__``), the same operations as the CLI::

    import mmsim
    r = mmsim.run("lockstress", machine="tiny", kernel="v6.6+362d37a106dd", store=False)
    c = mmsim.compare("lockstress", ["v3.12", "v3.13", "v4.14"], runs=3)
    c.to_frame()                        # one row per metric, a mean / %stddev / %change column per kernel
    mmsim.results.metrics(wide=True)    # every stored run, a column per metric

Names are imported on first use, so ``import mmsim`` (and ``mmsim --help``) stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The optional compiled core (mmsim/corebuild.py builds it): its modules, when built for these sources, load from the
# build instead of their .py files; must come before anything imports them. Identical results either way.
from mmsim import _coreload

_coreload.install()

__all__ = ["RunSpec", "bisect", "compare", "get_machine", "reproduce", "resolve_kernel", "results", "run", "sweep"]

if TYPE_CHECKING:
    from mmsim import results
    from mmsim.api import bisect, compare, get_machine, reproduce, resolve_kernel, run, sweep
    from mmsim.experiments.run import RunSpec


def __getattr__(name: str) -> Any:
    if name == "results":
        return importlib.import_module("mmsim.results")
    if name in __all__:
        return getattr(importlib.import_module("mmsim.api"), name)
    raise AttributeError(f"module 'mmsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
