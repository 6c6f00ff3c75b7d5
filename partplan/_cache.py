"""Where numba keeps partplan's compiled kernels, and the first-compile notice.

Imported by every module that defines numba kernels, *before* numba is
imported there (numba picks its cache directory when a function is
decorated). The cache goes to the user's cache directory, not into the
installed package:

* ``$NUMBA_CACHE_DIR`` if already set (left as it is);
* else ``$PARTPLAN_CACHE/numba`` if ``PARTPLAN_CACHE`` is set;
* else ``$XDG_CACHE_HOME/partplan/numba`` or ``~/.cache/partplan/numba``.

When numba is about to compile a partplan kernel (a cache miss) and the cache
holds no index file (``*.nbi``) of that kernel's module yet, one line
``partplan: compiling kernels (first run only: up to ~M s for all of them, ~N s for this command's
first)`` (M: the partitioner's, the slowest; N: the first compiling module's) goes to stderr, once per
process, then ``partplan: compiling kernels ... N s`` every 10 s while kernels
keep compiling and ``partplan: kernels compiled in N s`` within a second of
the last one (a daemon thread; numba's LLVM passes release the GIL). ``PARTPLAN_QUIET=1``
silences all of it.
"""
from __future__ import annotations

import glob
import os
import sys
import threading
import time
from pathlib import Path

# rough first-compile time of each module's kernels (measured on a laptop-class CPU)
_ESTIMATE_S = {"partplan.partition": 70, "partplan.runtime": 10, "partplan": 5}


def cache_root() -> Path:
    """partplan's cache directory (``$PARTPLAN_CACHE``, XDG, ``~/.cache/partplan``)."""
    env = os.environ.get("PARTPLAN_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "partplan"


def numba_cache_dir() -> str:
    """The directory numba caches into (sets ``NUMBA_CACHE_DIR`` when unset)."""
    cur = os.environ.get("NUMBA_CACHE_DIR")
    if cur:
        return cur
    d = str(cache_root() / "numba")
    os.environ["NUMBA_CACHE_DIR"] = d
    if "numba.core.config" in sys.modules:  # numba already read its settings: make it re-read them
        try:
            sys.modules["numba.core.config"].reload_config()
        except Exception:  # pragma: no cover - numba internals changed
            pass
    return d


_noticed = False
_TICK_S = 10.0     # seconds between the elapsed-time lines of a first compile
_active = 0        # partplan kernels compiling now (numba nests compiles of called kernels)
_last_end = 0.0    # time.monotonic() when the last one finished


def _estimate(module: str) -> int:
    for prefix in sorted(_ESTIMATE_S, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return _ESTIMATE_S[prefix]
    return 10


def _has_index(dispatcher) -> bool:
    """True when numba's cache dir holds an index file of ``dispatcher``'s module."""
    try:
        path = dispatcher._cache._cache_path
    except AttributeError:
        return True  # no cache (or unknown numba internals): say nothing
    stem = Path(dispatcher.py_func.__code__.co_filename).stem
    return bool(glob.glob(os.path.join(glob.escape(path), f"{glob.escape(stem)}.*.nbi")))


def _on_compile(disp) -> None:
    """A partplan kernel (numba dispatcher ``disp``) is about to compile."""
    global _noticed
    if _noticed or _quiet() or _has_index(disp):
        return
    _noticed = True
    module = disp.py_func.__module__
    print(f"partplan: compiling kernels (first run only: up to ~{max(_ESTIMATE_S.values())} s for all of them, "
          f"~{_estimate(module)} s for this command's first)", file=sys.stderr, flush=True)
    threading.Thread(target=_ticker, args=(time.monotonic(), _TICK_S), name="partplan-compile-ticks",
                     daemon=True).start()


def _quiet() -> bool:
    return os.environ.get("PARTPLAN_QUIET", "") not in ("", "0")


def _ticker(t0: float, every: float) -> None:
    """Print the elapsed seconds every ``every`` s while kernels compile, and one
    closing line (when any tick was printed) once none has compiled for a
    second (checked every second, or every ``every`` s when shorter)."""
    poll = min(1.0, every)
    ticks, last = 0, t0
    while True:
        time.sleep(poll)
        now = time.monotonic()
        if _active <= 0 and now - _last_end >= poll:
            if ticks and not _quiet():
                print(f"partplan: kernels compiled in {_last_end - t0:.0f} s", file=sys.stderr, flush=True)
            return
        if now - last >= every:
            last, ticks = now, ticks + 1
            if not _quiet():
                print(f"partplan: compiling kernels ... {now - t0:.0f} s", file=sys.stderr, flush=True)


def _partplan_dispatcher(ev):
    """The dispatcher of a compile event when it is a partplan kernel, else None."""
    try:
        disp = ev.data["dispatcher"]
        return disp if (disp.py_func.__module__ or "").startswith("partplan") else None
    except (KeyError, AttributeError, TypeError):
        return None


numba_cache_dir()  # before anything below imports numba

try:  # pragma: no cover - depends on numba being installed
    from numba.core import event as _event
except ImportError:  # no numba: kernels run as Python, nothing to compile
    _event = None

if _event is not None:
    class _Listener(_event.Listener):
        def on_start(self, ev):
            global _active
            disp = _partplan_dispatcher(ev)
            if disp is not None:
                _active += 1
                _on_compile(disp)

        def on_end(self, ev):
            global _active, _last_end
            if _partplan_dispatcher(ev) is not None:
                _active -= 1
                _last_end = time.monotonic()

    _event.register("numba:compile", _Listener())
