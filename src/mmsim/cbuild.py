"""Compile the small C microbenchmarks that native measurement runs (``native/mb.c``, ``native/lockbench.c``).

Each binary is cached under ``$XDG_CACHE_HOME/mmsim`` (``~/.cache/mmsim``) by the hash of its source, so an
edited source is rebuilt and concurrent builders never see a half-written file (build to a per-process name,
then rename). Without a working C compiler the caller gets None and keeps its estimates.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path


def compiled(source: Path, stem: str, flags: tuple[str, ...] = ("-O2", "-pthread")) -> Path | None:
    """``source`` compiled with ``cc`` and ``flags`` (default ``-O2 -pthread``; cached per source hash and
    flags), or None when no C compiler works."""
    src = source.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mmsim"
    tag = hashlib.sha256(src + " ".join(flags).encode()).hexdigest()[:12] if flags != ("-O2", "-pthread") else (
        hashlib.sha256(src).hexdigest()[:12])
    exe = cache / f"{stem}-{tag}"
    if exe.is_file():
        return exe
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return None
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(f".{os.getpid()}")
        r = subprocess.run([cc, *flags, "-o", str(tmp), str(source)], capture_output=True, timeout=60)
        if r.returncode != 0:
            return None
        tmp.replace(exe)
    except (OSError, subprocess.SubprocessError):
        return None
    return exe
