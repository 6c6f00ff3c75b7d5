"""A heartbeat line while a long call runs (a backend, V-cycles, refinement passes).

``with _heartbeat(progress, backend): ...`` calls ``progress("partitioning with
<backend>: N s elapsed")`` after HEARTBEAT_FIRST_S seconds, then every
HEARTBEAT_EVERY_S seconds, so a user sees the work move.

Two carriers:

* a daemon **thread** calling ``progress`` (any callable; the API's default);
* a tiny **child process** writing the same line straight to stderr, when
  ``progress`` is a :class:`StderrProgress` writing to the real stderr (the
  CLI). C engines (METIS, KaMinPar) hold the GIL for their whole call, so a
  thread cannot speak while they run; a process can. The child reads a pipe
  from its parent and ends when the pipe closes (body done, error, or parent
  killed), so it never outlives the call.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

_WRITE_LOCK = threading.Lock()

# heartbeat while a backend runs (seconds): first message, then every HEARTBEAT_EVERY_S
HEARTBEAT_FIRST_S = 2.0
HEARTBEAT_EVERY_S = 5.0

# the child: waits on its stdin (the parent's pipe) with a timeout; EOF ends it
# (Ctrl-C reaches the whole process group: the child ignores it and ends with its parent instead of
# printing a traceback; a closed stderr ends it quietly)
_CHILD = r"""
import os, select, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
label, t0, start, first, every = sys.argv[1], *map(float, sys.argv[2:6])
wait = max(0.0, first - (time.time() - start))
while True:
    if select.select([0], [], [], wait)[0]:
        break
    now = time.time()
    try:
        os.write(2, ("[%7.1fs] %s: %.0f s elapsed\n" % (now - t0, label, now - start)).encode("utf-8", "replace"))
    except OSError:
        break
    wait = every
"""


class StderrProgress:
    """The CLI's progress printer: ``progress(msg)`` writes ``[   12.3s] msg`` to stderr
    (seconds since ``t0``, a ``time.perf_counter()`` value); nothing when ``quiet``.

    >>> say = StderrProgress(quiet=True); say("reading g.mtx")   # prints nothing
    """

    def __init__(self, t0: float | None = None, quiet: bool = False):
        self.t0 = time.perf_counter() if t0 is None else t0
        self.quiet = bool(quiet)

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            line = f"[{time.perf_counter() - self.t0:7.1f}s] {msg}\n"
            with _WRITE_LOCK:    # the pipeline's lanes report from several threads: one line each
                sys.stderr.write(line)
                sys.stderr.flush()

    def wall_t0(self) -> float | None:
        """``t0`` on the wall clock (seconds since the epoch) when lines may be written straight to
        file descriptor 2 by another process; None when quiet or when sys.stderr is replaced
        (a ``-q`` filter, a test's capture)."""
        if self.quiet or sys.stderr is not sys.__stderr__ or sys.__stderr__ is None:
            return None
        return time.time() - (time.perf_counter() - self.t0)


class _heartbeat:
    """Context manager: while the body runs, "<label>: N s elapsed" after HEARTBEAT_FIRST_S, then
    every HEARTBEAT_EVERY_S (label default "partitioning with <backend>"); nothing when
    ``progress`` is None. The thread or child is stopped and reaped on exit, error or not."""

    def __init__(self, progress, backend, label: str | None = None):
        self.progress, self.backend, self.thread, self.child = progress, backend, None, None
        self.label = f"partitioning with {backend}" if label is None else label

    def __enter__(self):
        if self.progress is None:
            return self
        wall = getattr(self.progress, "wall_t0", lambda: None)()
        if wall is not None and self._start_child(wall):
            return self
        self.stop = threading.Event()
        t0 = time.perf_counter()

        def beat():
            wait = HEARTBEAT_FIRST_S
            while not self.stop.wait(wait):
                try:
                    self.progress(f"{self.label}: {time.perf_counter() - t0:.0f} s elapsed")
                except Exception:  # a broken progress callback must not kill the partition
                    return
                wait = HEARTBEAT_EVERY_S

        self.thread = threading.Thread(target=beat, name="partplan-heartbeat", daemon=True)
        self.thread.start()
        return self

    def _start_child(self, wall_t0: float) -> bool:
        label = "".join(c if c.isprintable() else "?" for c in self.label)
        try:
            sys.stderr.flush()
            self.child = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _CHILD, label, repr(wall_t0), repr(time.time()),
                 repr(HEARTBEAT_FIRST_S), repr(HEARTBEAT_EVERY_S)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, close_fds=True)
        except OSError:   # no process to spare: fall back to the thread
            self.child = None
            return False
        return True

    def __exit__(self, *exc):
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
        if self.child is not None:
            self.child.stdin.close()            # EOF: the child ends at once
            try:
                self.child.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
        return False
