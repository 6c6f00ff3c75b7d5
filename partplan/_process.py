"""This process at the operating-system level: its memory, its death with
its launcher, and its C-level standard output.

* **Memory** (bytes): :func:`peak_rss_bytes` / :func:`current_rss_bytes` read
  ``/proc/self/status`` on Linux (``VmHWM`` peak, ``VmRSS`` now; elsewhere
  ``ru_maxrss``); :func:`reset_peak` lets a stage report its own peak, and
  :class:`Stages` records wall time and peak per stage (the distributed plan
  build and the MPI partitioner report them).
* **Dying with the launcher**: :func:`die_with_parent` asks the kernel for a
  SIGKILL when the parent dies (``PR_SET_PDEATHSIG``) — the MPI partitioner's
  ``mpirun`` and its ranks, the runtime's workers.
* **Engines' prints**: METIS writes its diagnostics with C ``printf``
  (e.g. ``***Cannot bisect a graph with 0 vertices!``) straight to file
  descriptor 1, below Python's ``sys.stdout``, which would make
  ``partplan partition --json``'s record unreadable.
  :func:`engine_output_to_stderr` points descriptor 1 at standard error
  while an engine runs (flushing the C library's buffers before it points it
  back), so those lines reach the terminal as diagnostics and standard output
  holds only what partplan writes.

>>> with engine_output_to_stderr():
...     pass
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status in bytes (None without /proc or the field)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """Peak resident set size of this process in bytes (``VmHWM`` of
    /proc/self/status; ``ru_maxrss`` where there is no /proc)."""
    peak = _status_bytes("VmHWM")
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024 if peak is None else peak


def current_rss_bytes() -> int:
    """Resident set size of this process now, in bytes (``VmRSS``; 0 without /proc)."""
    now = _status_bytes("VmRSS")
    return 0 if now is None else now


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs).
    False where not allowed (then stage peaks are cumulative)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


_LOCK = threading.RLock()
_STATE = {"depth": 0, "saved": None}     # nesting depth; the duplicate of the original descriptor 1


def _flush_c_stdio() -> None:
    """fflush(NULL): every C stdio buffer of the process (METIS's printf output) out to its fd."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):    # no C library handle here: nothing buffered there
        pass


@contextmanager
def engine_output_to_stderr() -> Iterator[None]:
    """Within the block, writes to file descriptor 1 (C ``printf`` of an engine) go to descriptor 2,
    or nowhere (``os.devnull``) under ``PARTPLAN_QUIET=1`` (``-q``: METIS's diagnostics, such as
    "Cannot bisect a graph with 0 vertices" when k nears n, are no errors; what they mean partplan
    reports itself).

    Re-entrant and thread-safe (the outermost block redirects, the last one out restores), and a
    no-op when descriptor 1 or 2 is not open (an embedding application without them)."""
    with _LOCK:
        if _STATE["depth"] == 0:
            try:
                sys.stdout.flush()
            except (AttributeError, ValueError, OSError):
                pass
            _flush_c_stdio()
            try:
                saved = os.dup(1)
            except OSError:
                saved = None
            if saved is not None:
                try:
                    if os.environ.get("PARTPLAN_QUIET", "") not in ("", "0"):
                        null = os.open(os.devnull, os.O_WRONLY)
                        try:
                            os.dup2(null, 1)
                        finally:
                            os.close(null)
                    else:
                        os.dup2(2, 1)
                except OSError:
                    os.close(saved)
                    saved = None
            _STATE["saved"] = saved
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0 and _STATE["saved"] is not None:
                _flush_c_stdio()
                os.dup2(_STATE["saved"], 1)
                os.close(_STATE["saved"])
                _STATE["saved"] = None


class Stages:
    """Wall time (s) and peak RSS (bytes) of each stage of this process:
    ``start(name)`` … ``stop()`` appends ``{stage, seconds, peak_rss_bytes}``
    to :attr:`rows` (the peak is the stage's own where :func:`reset_peak` is
    allowed, else cumulative: :attr:`resettable`)."""

    def __init__(self):
        self.rows: list[dict] = []
        self.baseline = current_rss_bytes()   # interpreter + imports before any data
        self.resettable = reset_peak()
        self.t = time.perf_counter()
        self.name = None

    def start(self, name: str) -> None:
        if self.resettable:
            reset_peak()
        self.name, self.t = name, time.perf_counter()

    def stop(self) -> None:
        self.rows.append({"stage": self.name, "seconds": round(time.perf_counter() - self.t, 4),
                          "peak_rss_bytes": peak_rss_bytes()})


PR_SET_PDEATHSIG = 1   # prctl(2) option: the signal this process gets when its parent dies


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies
    (Linux ``prctl(PR_SET_PDEATHSIG)``; also usable as a ``preexec_fn``).
    True when set; False elsewhere or without a libc ``prctl``."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False


def die_with_parent(expected_ppid: int | None = None) -> bool:
    """SIGKILL this process when its parent dies, then close the race: if
    the parent is already gone (this process was re-parented — to
    ``expected_ppid``'s replacement, or to init when none is given), exit now
    with status 137. Returns whether the death signal is set."""
    ok = set_parent_death_signal()
    ppid = os.getppid()
    if (expected_ppid is not None and ppid != int(expected_ppid)) or (expected_ppid is None and ppid == 1):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(137)
    return ok
