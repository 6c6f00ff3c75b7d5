"""Keep the engines' own C-level prints off standard output.

METIS writes its diagnostics with ``printf`` (e.g. ``***Cannot bisect a graph with 0 vertices!``
on a star whose hub outweighs a part), straight to file descriptor 1, below Python's
``sys.stdout``. ``partplan partition --json`` prints its record on standard output, so such a line
would make the record unreadable. :func:`engine_output_to_stderr` points descriptor 1 at standard
error while an engine runs and flushes the C library's buffers before it points it back, so
those lines reach the user's terminal as diagnostics and standard output holds only what
partplan writes.

>>> with engine_output_to_stderr():
...     pass
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

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
    """Within the block, writes to file descriptor 1 (C ``printf`` of an engine) go to descriptor 2.

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
