"""What the benchmarks share: comparing a view's rows with DuckDB's, a process's peak RSS, and
a free port for a server on 127.0.0.1. Invariant: nothing here measures or prints."""

from __future__ import annotations

import math
import resource
import socket
from collections import Counter
from pathlib import Path
from typing import Any


def same(got: Counter[Any], want: Counter[Any]) -> bool:
    """Equal multisets of rows, floats to 1e-9 relative (the engine sums exactly, DuckDB in
    floating point: the last bits may differ)."""
    g = sorted((+got).items(), key=repr)
    w = sorted((+want).items(), key=repr)
    if len(g) != len(w):
        return False
    for (gr, gm), (wr, wm) in zip(g, w, strict=True):
        if gm != wm or len(gr) != len(wr):
            return False
        for x, y in zip(gr, wr, strict=True):
            if isinstance(x, float) or isinstance(y, float):
                if not (isinstance(x, (int, float)) and isinstance(y, (int, float))
                        and (x == y or math.isclose(x, y, rel_tol=1e-9))):
                    return False
            elif x != y:
                return False
    return True


def reset_peak_rss() -> bool:
    """Start this process's peak RSS (VmHWM in /proc/self/status) afresh at its current RSS
    (Linux's clear_refs "5"), so a later `peak_rss_mb(os.getpid())` measures what came
    after, not a harness's set-up; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident memory in MB of process `pid` (default: this one; NaN if unreadable)."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
