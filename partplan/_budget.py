"""The one memory budget: every size that enters partplan — read from a file
(a header's counts, an array's shape, a partition's length), given on the
command line (rows × f × itemsize of features, a topology's ranks, a model's
classes, a generator's size, threads) — is compared with it where it enters,
before any work or allocation.

The budget is ``$PARTPLAN_MAX_BYTES`` (``4G``, ``512MiB``, plain bytes) when
set, else 80 % of the memory this process may use (physical RAM, cgroup
limit, ``RLIMIT_AS``). A writer checks what it writes with the same rule
its reader applies, so nothing is written that a reader refuses.
"""
from __future__ import annotations

import os
from pathlib import Path

from .errors import GraphFormatError, OptionError, SizeLimitError

ENV_MAX_BYTES = "PARTPLAN_MAX_BYTES"
DEFAULT_RAM_FRACTION = 0.8
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def _physical_memory() -> int | None:
    """Bytes this process may use: physical RAM, lowered by a cgroup limit
    (containers) and by ``RLIMIT_AS``; None when nothing is known."""
    cands = []
    try:
        cands.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            txt = Path(f).read_text().strip()
        except OSError:
            continue
        if txt.isdigit() and int(txt) < (1 << 60):
            cands.append(int(txt))
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            cands.append(soft)
    except (ImportError, ValueError, OSError):
        pass
    return min(cands) if cands else None


def parse_bytes(text: str) -> int:
    """``"123"``, ``"512M"``, ``"4GiB"``, ``"1.5T"`` -> bytes (ValueError if malformed)."""
    t = text.strip().lower().replace(" ", "")
    num = t.rstrip("kmgtib")
    unit = t[len(num):]
    if unit not in _UNITS or not num:
        raise ValueError(f"not a byte count: {text!r}")
    v = float(num) * _UNITS[unit]
    if not (v >= 0) or v == float("inf"):
        raise ValueError(f"not a byte count: {text!r}")
    return int(v)


def memory_budget() -> int:
    """Most bytes a reader may allocate for one graph: ``$PARTPLAN_MAX_BYTES``
    (``4G``, ``512MiB``, plain bytes) when set, else 80% of the memory this
    process may use (physical RAM, cgroup limit, ``RLIMIT_AS``)."""
    env = os.environ.get(ENV_MAX_BYTES)
    if env:
        try:
            return parse_bytes(env)
        except ValueError:
            raise GraphFormatError(f"bad memory budget {env!r} (expected bytes, e.g. 8G or 512MiB)",
                                   field=ENV_MAX_BYTES) from None
    mem = _physical_memory()
    return int(mem * DEFAULT_RAM_FRACTION) if mem else 1 << 62


def human_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024 or unit == "PiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} EiB"  # pragma: no cover




def check_budget(nbytes: int, path, what: str, *, line: int | None = None, field: str | None = None) -> None:
    """Raise :class:`~partplan.errors.SizeLimitError` (naming the file, the
    line and the field) when ``what`` needs more than :func:`memory_budget`
    bytes. Called with sizes read from a header, BEFORE allocating."""
    budget = memory_budget()
    if nbytes > budget:
        raise SizeLimitError(f"{what} needs at least {human_bytes(nbytes)}, above the memory budget of "
                             f"{human_bytes(budget)} (raise it with {ENV_MAX_BYTES}=<bytes>, e.g. 64G)",
                             path, line, field=field)


def check_array_bytes(rows: int, cols: int, itemsize: int, what: str, *, option: str | None = None,
                      path=None, field: str | None = None, copies: int = 1) -> int:
    """``rows × cols × itemsize × copies`` bytes (Python ints: no overflow)
    checked against :func:`memory_budget`; returns the bytes. ``option``
    (e.g. ``-f``) makes it an :class:`~partplan.errors.OptionError` naming
    the option; else a :class:`~partplan.errors.SizeLimitError` naming
    ``path`` / ``field``."""
    rows, cols, itemsize, copies = int(rows), int(cols), int(itemsize), int(copies)
    nbytes = max(rows, 0) * max(cols, 0) * max(itemsize, 0) * max(copies, 1)
    budget = memory_budget()
    if nbytes > budget:
        msg = (f"{what}: {rows} × {cols} × {itemsize} bytes{f' × {copies}' if copies > 1 else ''} = "
               f"{human_bytes(nbytes)}, above the memory budget of {human_bytes(budget)} "
               f"(raise it with {ENV_MAX_BYTES}=<bytes>, e.g. 64G)")
        if option is not None:
            raise OptionError(f"{option}: {msg}")
        raise SizeLimitError(msg, path, field=field)
    return nbytes


def check_count(value: int, limit: int, option: str, what: str) -> int:
    """An integer option (ranks of a topology, classes, a generator's size)
    of at most ``limit``; one :class:`~partplan.errors.OptionError` naming
    the option otherwise."""
    value = int(value)
    if value > limit:
        raise OptionError(f"{option}: {what} {value} is more than {limit} (the most this machine's memory "
                          f"budget of {human_bytes(memory_budget())} allows; raise it with {ENV_MAX_BYTES})")
    return value


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_threads(threads: int | None, option: str = "--threads") -> int | None:
    """``threads`` (per process) at most the cores this process may use
    (:func:`usable_cores`); more is refused with one
    :class:`~partplan.errors.OptionError` naming the option and the cores,
    before any thread or process starts. None passes (the default)."""
    if threads is None:
        return None
    threads = int(threads)
    cores = usable_cores()
    if threads < 1:
        raise OptionError(f"{option}: {threads} threads; expected at least 1")
    if threads > cores:
        raise OptionError(f"{option}: {threads} threads per process is more than the {cores} cores this "
                          f"process may use")
    return threads


__all__ = ["ENV_MAX_BYTES", "check_array_bytes", "check_budget", "check_count", "check_threads", "human_bytes",
           "memory_budget", "parse_bytes", "usable_cores"]
