"""Bounded reading of a JSON file: what every JSON reader of a file uses.

:func:`read_json` opens the file without blocking (a FIFO, a directory or a
device is refused on the open descriptor before any byte is read), compares
its size with the caller's limit and with the memory budget before reading,
reads at most that many bytes (a file that grows meanwhile is refused too),
decodes UTF-8 strictly and parses with :func:`partplan.io.trust.load_json`'s
limits (nesting depth, integer length, no NaN / Infinity). Every problem is
one exception of the caller's type, naming the file (escaped) and what it was
read as.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from .._budget import human_bytes, memory_budget
from ..errors import PartplanError, PlanError

__all__ = ["parse_json_bytes", "read_json", "read_json_bytes"]

ErrorFactory = Callable[[str], Exception]


def _where(path) -> str:
    from .trust import printable
    return printable(str(path))


def read_json_bytes(path, *, max_bytes: int, what: str, error: ErrorFactory = PartplanError,
                    follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes`` and within the memory budget,
    checked on ``fstat`` before reading). ``follow=False`` refuses a symbolic link. ``error`` makes the
    exception from the one-line message (default :class:`~partplan.errors.PartplanError`)."""
    from ._common import open_regular
    where = _where(path)
    fd, st = open_regular(Path(path), follow=follow,
                          error=lambda problem: error(f"{where}: {what}: {problem}"))
    with os.fdopen(fd, "rb") as fh:
        limit = min(int(max_bytes), memory_budget())
        if st.st_size > limit:
            raise error(f"{where}: {what}: {st.st_size} bytes ({human_bytes(st.st_size)}), more than the "
                        f"{human_bytes(limit)} such a file may hold")
        try:
            raw = fh.read(limit + 1)   # bounded even if the file grows after the fstat
        except OSError as exc:
            raise error(f"{where}: {what}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > limit:
        raise error(f"{where}: {what}: grew past {human_bytes(limit)} while it was read")
    return raw


def parse_json_bytes(raw: bytes, path, *, what: str, error: ErrorFactory = PartplanError) -> Any:
    """``raw`` (the bytes of the file ``path``) decoded as strict UTF-8 and parsed with
    :func:`partplan.io.trust.load_json`'s limits; one exception made by ``error`` otherwise."""
    from .trust import load_json
    where = _where(path)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: {what}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    try:
        return load_json(raw, f"{where}: {what}")
    except PlanError as exc:
        if error is PlanError:
            raise
        raise error(str(exc)) from None


def read_json(path, *, max_bytes: int, what: str, error: ErrorFactory = PartplanError,
              follow: bool = True) -> Any:
    """The JSON value of the file ``path``, read through :func:`read_json_bytes` and parsed by
    :func:`parse_json_bytes`. One exception made by ``error`` naming the file and ``what`` on any
    problem."""
    raw = read_json_bytes(path, max_bytes=max_bytes, what=what, error=error, follow=follow)
    return parse_json_bytes(raw, path, what=what, error=error)
