"""Kernels (named policy sets) and patches (named deltas with upstream commit ids)."""

from mmsim.kernels.catalog import (
    KERNELS,
    PATCHES,
    POLICIES,
    Kernel,
    Patch,
    Policy,
    ResolvedKernel,
    list_kernels,
    list_patches,
    resolve,
)

__all__ = [
    "KERNELS", "PATCHES", "POLICIES", "Kernel", "Patch", "Policy", "ResolvedKernel",
    "list_kernels", "list_patches", "resolve",
]
