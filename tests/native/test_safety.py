"""Safety guards: memory budget, hugetlb pool restore on every exit path, reaping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmsim.errors import UserError
from mmsim.native import safety, sysinfo, tasks
from mmsim.native.safety import HugetlbPool, Skip

CAN_RESIZE = sysinfo.is_root() and sysinfo.hugetlb_pool_pages() is not None


def test_check_memory_limit_is_the_documented_fraction() -> None:
    safety.check_memory("-p size", 500, available=1000)
    with pytest.raises(UserError, match="50% of MemAvailable"):
        safety.check_memory("-p size", 501, available=1000)


@pytest.mark.skipif(not CAN_RESIZE, reason="needs root and hugetlb")
@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt, safety.Interrupted])
def test_pool_restored_on_errors_and_interrupts(exc: type[BaseException]) -> None:
    before = sysinfo.hugetlb_pool_pages()
    need = sysinfo.read_meminfo().get("HugePages_Free", 0) + 2
    with pytest.raises(exc):
        with HugetlbPool(need):
            assert sysinfo.read_meminfo()["HugePages_Free"] >= need
            raise exc("stop")
    assert sysinfo.hugetlb_pool_pages() == before


@pytest.mark.skipif(not CAN_RESIZE, reason="needs root and hugetlb")
def test_sigterm_restores_the_pool() -> None:
    before = sysinfo.hugetlb_pool_pages()
    need = sysinfo.read_meminfo().get("HugePages_Free", 0) + 1
    with pytest.raises(safety.Interrupted):
        with safety.terminate_as_exception(), HugetlbPool(need):
            os.kill(os.getpid(), signal.SIGTERM)
    assert sysinfo.hugetlb_pool_pages() == before


def test_without_root_or_hugetlb_it_is_a_clear_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Skip, match="no /proc/sys/vm/nr_hugepages"):
        with HugetlbPool(1, path=tmp_path / "missing"):
            pass
    fake = tmp_path / "nr_hugepages"
    fake.write_text("0\n")
    monkeypatch.setattr(sysinfo, "is_root", lambda: False)
    monkeypatch.setattr(sysinfo, "read_meminfo", lambda proc=None: {"HugePages_Free": 0})
    with pytest.raises(Skip, match="needs root"):
        with HugetlbPool(4, path=fake):
            pass
    assert fake.read_text() == "0\n"  # nothing written


def test_failed_task_is_reported_and_every_child_reaped() -> None:
    def body(i: int) -> dict[str, float]:
        if i == 1:
            raise ValueError("task one fails")
        return {"x": 1.0}

    with pytest.raises(RuntimeError, match="task one fails"):
        tasks.run_tasks(3, body)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_reaper_kills_the_whole_group() -> None:
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    with safety.Reaper(proc):
        pass
    assert proc.returncode == -signal.SIGKILL
    assert _live_members(proc.pid) == []  # the forked grandchild died too (a zombie awaiting init at most)


def _live_members(pgid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_cli_run_exits_130_and_leaves_no_process(sig: signal.Signals) -> None:
    marker = f"{20 + os.getpid() % 1000 / 100:.2f}"  # a run length no other run uses: finds our worker
    cmd = [sys.executable, "-m", "mmsim", "native", "will-it-scale/page_fault1", "-p", f"seconds={marker}",
           "-p", "nr_task=2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not _workers(marker) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)  # wait until the worker runs (the signal handlers are installed before it starts)
    workers = _workers(marker)
    if not workers:
        proc.kill()
        pytest.fail(f"the native worker never started: {proc.communicate()}")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    for sid in workers:
        assert _live_members(sid) == []


def _workers(marker: str) -> list[int]:
    """Session ids of native workers running with ``seconds=marker`` (each runs in its own session)."""
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"mmsim.native.worker" not in cmdline.read_bytes() or marker.encode() not in cmdline.read_bytes():
                continue
            fields = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out.append(int(fields[3]))
    return out
