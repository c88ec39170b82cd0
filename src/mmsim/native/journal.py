"""What a native run changed on the host, written down *before* it changes it,
so that a run killed with SIGKILL (no ``finally`` runs) is undone by the next one.

Each ``mmsim native`` run owns one journal in :func:`journal_dir`:
``run-<pid>-<ns>.json`` (the record) and ``run-<pid>-<ns>.lock`` (an
``flock`` held for the life of the run). The record lists:

* ``sysctls``: every ``/proc/sys/vm`` file the run will write and the value it
  had before (recorded and fsync'd before the write);
* ``tmpdirs``: the run's temporary directories (removed on recovery; only
  ``mmsim-native-*`` directories under the temp dir are ever removed);
* ``groups``: the worker process groups (pgid and the leader's start time:
  a pgid is killed only while it is still ours).

:func:`recover` (run first by every ``mmsim native``, and by
``mmsim native --restore``) takes every record whose lock is free (its run is
gone: the kernel drops an flock when its holder dies), kills what is left of
its worker groups, writes the recorded values back, removes its temp dirs
and then the record, and returns one line per action. A record from before the
last reboot (``boot_id`` differs) restores no sysctls: the reboot reset them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

ENV = "MMSIM_STATE_DIR"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
TMP_PREFIX = "mmsim-native-"
SYSCTL_ROOT = "/proc/sys/vm/"  # the only sysctls native mode writes (and a record may name)
RESTORE_TRIES = 100  # x 20 ms: pages of an exiting task are freed a moment after it dies
GROUP_EXIT_WAIT_S = 10.0


def journal_dir() -> Path:
    """``$MMSIM_STATE_DIR`` if set, else ``$XDG_STATE_HOME/mmsim/native`` (``~/.local/state/mmsim/native``)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "mmsim" / "native"


def _boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot), or None when there is no such process."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class Journal:
    """The record of one run. ``with Journal() as j: j.sysctl(path, value)``; the record is removed on a
    clean exit, after the caller put everything back."""

    def __init__(self, directory: Path | None = None) -> None:
        self.dir = directory or journal_dir()
        stem = f"run-{os.getpid()}-{time.time_ns()}"
        self.path = self.dir / f"{stem}.json"
        self.lock_path = self.dir / f"{stem}.lock"
        self.data: dict[str, Any] = {"pid": os.getpid(), "boot_id": _boot_id(), "sysctls": [], "tmpdirs": [],
                                     "groups": []}
        self._lock: Any = None

    def __enter__(self) -> Journal:
        from mmsim.errors import UserError

        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._lock = open(self.lock_path, "w")  # held until __exit__
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._save()
        except OSError as e:
            self._close_lock()
            raise UserError(f"${ENV}", str(self.dir), f"a writable directory for the native run journal "
                            f"({e.strerror})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        self._close_lock()

    def _close_lock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self.lock_path.unlink()
            self._lock.close()
            self._lock = None

    def _save(self) -> None:
        """Write the record atomically (temp file, fsync, rename), then fsync the directory."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self.data, f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def record_sysctl(self, path: Path, old: int) -> None:
        """Note ``path``'s value before the first write to it (later writes keep the first value)."""
        if not any(p == str(path) for p, _ in self.data["sysctls"]):
            self.data["sysctls"].append([str(path), old])
            self._save()

    def forget_sysctl(self, path: Path) -> None:
        """``path`` is back at its recorded value."""
        self.data["sysctls"] = [e for e in self.data["sysctls"] if e[0] != str(path)]
        self._save()

    def tmpdir(self) -> Path:
        """A new ``mmsim-native-*`` temporary directory, recorded before it is used."""
        d = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
        self.data["tmpdirs"].append(str(d))
        self._save()
        return d

    def drop_tmpdir(self, d: Path) -> None:
        shutil.rmtree(d, ignore_errors=True)
        self.data["tmpdirs"] = [t for t in self.data["tmpdirs"] if t != str(d)]
        self._save()

    def group(self, pgid: int) -> None:
        self.data["groups"].append([pgid, start_time(pgid)])
        self._save()


def _group_members(pgid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(stat.parent.name))
    return out


def _still_ours(pgid: int, started: int | None) -> bool:
    """The group is the one recorded: its leader runs with the recorded start time, or the leader is gone
    but members remain (the kernel never hands out a pid still in use as a process group id)."""
    now = start_time(pgid)
    if now is not None:
        return started is not None and now == started
    return bool(_group_members(pgid))


def _kill_group(pgid: int, started: int | None) -> bool:
    """SIGKILL what is left of a recorded worker group; False when nothing of it was running."""
    if not _group_members(pgid) or not _still_ours(pgid, started):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    while time.monotonic() < deadline and _group_members(pgid):
        time.sleep(0.01)
    return True


def _write_back(path: Path, value: int) -> bool:
    for _ in range(RESTORE_TRIES):
        try:
            path.write_text(str(value))
            if int(path.read_text().strip()) == value:
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return False


def _safe_tmpdir(t: str) -> bool:
    p = Path(t)
    return p.parent == Path(tempfile.gettempdir()) and p.name.startswith(TMP_PREFIX) and not p.is_symlink()


def recover(directory: Path | None = None) -> list[str]:
    """Undo what runs that are gone left behind (see the module docstring); one line per thing done."""
    d = directory or journal_dir()
    if not d.is_dir():
        return []
    lines: list[str] = []
    for rec in sorted(d.glob("run-*.json"), key=lambda p: p.stat().st_mtime if p.exists() else 0):
        lock_path = rec.with_suffix(".lock")
        try:
            lockf = open(lock_path, "a")  # closed below
        except OSError:
            continue
        try:
            try:
                fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its run is still going
            lines += _recover_one(rec)
            with contextlib.suppress(OSError):
                lock_path.unlink()
        finally:
            lockf.close()
    for stray in d.glob("run-*.tmp"):  # a record being written when its run died: no change followed it
        with contextlib.suppress(OSError):
            stray.unlink()
    return lines


def _recover_one(rec: Path) -> list[str]:
    if not rec.exists():
        return []  # its run finished between the listing and the lock
    try:
        data = json.loads(rec.read_text())
        pid = int(data["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            rec.unlink()
        return [f"removed an unreadable native run journal {rec}"]
    who = f"native run pid {pid}"
    lines = []
    for pgid, started in data.get("groups", []):
        if _kill_group(int(pgid), started):
            lines.append(f"killed worker process group {pgid} left by {who}")
    same_boot = data.get("boot_id") == _boot_id()
    for path, old in reversed(data.get("sysctls", [])):
        p = Path(path)
        if not path.startswith(SYSCTL_ROOT) or ".." in p.parts:
            lines.append(f"ignored {path} in the journal of {who}: not a /proc/sys/vm setting")
            continue
        name = "vm." + p.name
        if not same_boot:
            lines.append(f"not restoring {name}={old} recorded by {who} before the last reboot")
            continue
        try:
            now = int(p.read_text().strip())
        except (OSError, ValueError):
            now = None
        if now == int(old):
            continue
        ok = _write_back(p, int(old))
        lines.append(f"restored {name} to {old} (was {now}) left changed by {who}" if ok
                     else f"could not restore {name} to {old} (it is {now}) left changed by {who}")
    for t in data.get("tmpdirs", []):
        if _safe_tmpdir(t) and Path(t).exists():
            shutil.rmtree(t, ignore_errors=True)
            lines.append(f"removed temporary directory {t} left by {who}")
    with contextlib.suppress(OSError):
        rec.unlink()
    return lines
