"""Opening a file as a regular file, and reading a JSON file with limits: what every reader of a
file uses, at every layer (the topology's machine description included).

:func:`open_regular` opens without blocking (a FIFO never blocks the open) and checks the open
descriptor with ``fstat`` before any byte is read. :func:`load_json` parses JSON text with limits
(nesting depth counted before parsing, integer length, no NaN / Infinity). :func:`read_json` is
the two together with a size limit: the file's size is compared with the caller's limit and the
memory budget before it is read, read no further than that size, and decoded as strict UTF-8.
Every problem is one exception of the caller's type naming the file (escaped: see
:class:`~partplan.errors.PartplanError`). :mod:`partplan.io.jsonfile` and :mod:`partplan.io.trust`
re-export them.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._budget import human_bytes, memory_budget
from .errors import GraphFormatError, PartplanError, PlanError

__all__ = ["MAX_INT_DIGITS", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "file_kind", "json_depth", "load_json",
           "open_regular", "parse_json_bytes", "read_json", "read_json_bytes"]

ErrorFactory = Callable[[str], Exception]

# ----------------------------------------------------------------------------- regular files
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a non-regular file of ``st_mode`` is, in words."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike, *, follow: bool = True, error=None) -> tuple[int, os.stat_result]:
    """(read-only descriptor, fstat) of ``path`` if it is a regular file —
    checked on the open descriptor before any byte is read. The open is
    non-blocking (a FIFO never blocks it; the flag is cleared afterwards for
    a regular file) and, with ``follow=False``, refuses a symbolic link
    (``O_NOFOLLOW``). ``error``: makes the exception from a one-line problem
    (default :class:`~partplan.errors.GraphFormatError` naming ``path``)."""
    import fcntl
    make = error if error is not None else (lambda problem: GraphFormatError(problem, path))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise make("file not found") from None
    except OSError as exc:
        if not follow and (exc.errno == errno.ELOOP or os.path.islink(path)):
            raise make("is a symbolic link; refusing to follow it") from None
        raise make(f"cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise make(f"is {file_kind(st.st_mode)}, not a regular file")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~getattr(os, "O_NONBLOCK", 0))
    except BaseException:
        os.close(fd)
        raise
    return fd, st


# ----------------------------------------------------------------------------- JSON with limits
MAX_JSON_DEPTH = 64          # nesting of objects / arrays; a plan manifest needs 5
MAX_INT_DIGITS = 20          # int64 has at most 19 digits (+ sign)
MAX_JSON_BYTES = 1 << 30     # 1 GiB: a manifest listing 10^4 ranks' pairs is far below it

_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (MAX_INT_DIGITS + 1))
_PLAIN_STRING = re.compile(rb'"[^"]*"')


_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_DEPTH_BLOCK = 1 << 22   # bytes whose nesting is summed at a time (temporaries: 9 bytes per byte of it)
_ESCAPED_BLOCK = 1 << 20  # the same where the text holds escapes (temporaries: about 50 bytes per byte)


def json_depth(raw: bytes) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text ``raw``, brackets inside strings ignored.

    Summed a 4 MiB block at a time, so a large text needs a bounded amount beside itself. Text
    without a backslash has every quote open or close a string: one regex pass blanks the strings
    (a character class, no repeated group: a regex with one needed memory per character of a
    string). Otherwise a quote counts unless an odd run of backslashes precedes it, and a bracket
    counts where the quotes before it are even (:func:`_escaped_depth`). On text that is not JSON
    (an unterminated string) the count is of no use, and the parser refuses the text anyway."""
    if b"\\" in raw:
        return _escaped_depth(np.frombuffer(raw, dtype=np.uint8))
    body = np.frombuffer(_PLAIN_STRING.sub(b'""', raw), dtype=np.uint8)
    depth = deepest = 0
    for lo in range(0, body.size, _DEPTH_BLOCK):
        c = np.cumsum(_STEP[body[lo:lo + _DEPTH_BLOCK]], dtype=np.int64)
        deepest = max(deepest, depth + int(c.max()))
        depth += int(c[-1])
    return deepest


def _escaped_depth(body: np.ndarray) -> int:
    """:func:`json_depth` of text with escapes (uint8 ``body``), a 1 MiB block at a time: the
    parity of the quotes and the backslash run at a block's end carry into the next block."""
    depth = deepest = 0
    inside = 0          # 1 while a string is open at the block boundary
    run = 0             # backslashes ending the previous block
    for lo in range(0, body.size, _ESCAPED_BLOCK):
        b = body[lo:lo + _ESCAPED_BLOCK]
        pos = np.arange(b.size, dtype=np.int64)
        # the last non-backslash at or before each position (-1 - run: the carried run before the block)
        last = np.maximum.accumulate(np.where(b != _BACKSLASH, pos, -1 - run))
        before = np.empty(b.size, dtype=np.int64)          # backslashes right before each position
        before[0] = run
        before[1:] = pos[:-1] - last[:-1]
        quote = (b == _QUOTE) & (before % 2 == 0)
        opened = (inside + np.cumsum(quote, dtype=np.int64)) % 2     # 1 from an opening quote to its close
        c = np.cumsum(np.where(opened == 0, _STEP[b], 0), dtype=np.int64)
        deepest = max(deepest, depth + int(c.max()))
        depth += int(c[-1])
        inside = int(opened[-1])
        run = int(b.size - 1 - last[-1])
    return deepest


class _JsonLimit(ValueError):
    pass


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _JsonLimit(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_constant(name: str):
    raise _JsonLimit(f"{name} is not a JSON number")


def _unique_keys(pairs: list) -> dict:
    """An object's members as a dict; a key given twice is refused (json's own rule keeps the last
    silently, so a file could say two things and mean the one a reader least expects)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        dup = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _JsonLimit(f"the key {dup[:64]!r} appears twice in one object")
    return out


def json_default(value):
    """``json.dumps(..., default=json_default)``: numpy scalars (integers, floats, bools) as their
    Python values and numpy arrays as lists — the one conversion for every JSON partplan writes
    (plan manifests, benchmark results); anything else is json's TypeError.

    >>> import json, numpy as np
    >>> json.dumps({"n": np.int64(3), "ok": np.bool_(True), "x": np.arange(2)}, default=json_default)
    '{"n": 3, "ok": true, "x": [0, 1]}'
    """
    import numpy as np
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def load_json(raw: bytes | str, where: str) -> Any:
    """Parse JSON text from a file with limits: at most :data:`MAX_JSON_BYTES`
    bytes, :data:`MAX_JSON_DEPTH` levels of nesting, integers of at most
    :data:`MAX_INT_DIGITS` digits, no NaN / Infinity, no key twice in an object. ``where`` (the file)
    starts the one :class:`PlanError` raised otherwise."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_JSON_BYTES:
        raise PlanError(f"{where}: {len(raw)} bytes of JSON, more than partplan's JSON files may hold "
                        f"({MAX_JSON_BYTES})")
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise PlanError(f"{where}: JSON nested {depth} levels deep (at most {MAX_JSON_DEPTH})")
    # an integer past the limit needs a run of that many digits: without one, the compiled parser
    # reads the ints itself (the per-integer hook took 2/3 of reading a manifest of k² pairs)
    hook = _parse_int if b"\x00" in raw or _LONG_DIGITS.search(raw) else None   # UTF-16 / 32: NULs between digits
    try:
        return json.loads(raw, parse_int=hook, parse_constant=_parse_constant, object_pairs_hook=_unique_keys)
    except _JsonLimit as exc:
        raise PlanError(f"{where}: outside partplan's JSON limits: {exc}") from None
    except UnicodeDecodeError:     # json.loads guesses UTF-8/16/32 from the first bytes: name no codec
        raise PlanError(f"{where}: not valid JSON (not UTF-8 text)") from None
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise PlanError(f"{where}: not valid JSON ({exc})") from None


# ----------------------------------------------------------------------------- JSON files
def read_json_bytes(path, *, max_bytes: int, what: str, error: ErrorFactory = PartplanError,
                    follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (at most ``max_bytes`` and within the memory budget,
    checked on ``fstat`` before reading). ``follow=False`` refuses a symbolic link. ``error`` makes the
    exception from the one-line message (default :class:`~partplan.errors.PartplanError`)."""
    where = str(path)
    fd, st = open_regular(Path(path), follow=follow,
                          error=lambda problem: error(f"{where}: {what}: {problem}"))
    with os.fdopen(fd, "rb") as fh:
        limit = min(int(max_bytes), memory_budget())
        if st.st_size > limit:
            raise error(f"{where}: {what}: {st.st_size} bytes ({human_bytes(st.st_size)}), more than the "
                        f"{human_bytes(limit)} such a file may hold")
        try:   # st_size + 1 (a read of n bytes allocates n up front): bounded even if the file grows
            raw = fh.read(st.st_size + 1)
        except OSError as exc:
            raise error(f"{where}: {what}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > st.st_size:
        raise error(f"{where}: {what}: grew while it was read (more than its {st.st_size} bytes)")
    return raw


def parse_json_bytes(raw: bytes, path, *, what: str, error: ErrorFactory = PartplanError) -> Any:
    """``raw`` (the bytes of the file ``path``) decoded as strict UTF-8 and parsed with
    :func:`load_json`'s limits; one exception made by ``error`` otherwise."""
    where = str(path)
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
