"""Benchmarks modelled after their real sources, each reporting its own metric names."""

from mmsim.workloads.base import ParamInfo, Workload, get_workload, list_workloads, register

__all__ = ["ParamInfo", "Workload", "get_workload", "list_workloads", "register"]
