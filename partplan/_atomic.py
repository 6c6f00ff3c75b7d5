"""Atomic single-file output: write a temporary file in the target folder,
then ``os.replace`` it onto the name, so a reader never sees half a file and a
failure leaves the old file (or none) in place. Plans (directories) have their
own temp-dir + rename in :mod:`partplan.plan.store`.

Temporary names carry the writer's process id (``.NAME.tmp-<pid>-XXXXXXXX``,
:func:`temp_prefix`), so the next write to ``NAME`` can tell the leftovers of
a writer killed with SIGKILL (its pid no longer runs) from a live concurrent
writer, and remove them (:func:`clean_stale`). Leftovers without a pid (older
partplan versions) are removed once they are :data:`STALE_SECONDS` old.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

# a temp file/dir without a pid in its name is stale after this many seconds
STALE_SECONDS = 3600.0


def temp_prefix(path: str | os.PathLike, kind: str = "tmp") -> str:
    """Name prefix of ``path``'s temporaries: ``.NAME.<kind>-<pid>-`` (kind
    "tmp" for what is being written, "old" for a replaced plan)."""
    return f".{Path(path).name}.{kind}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):  # another user's process / absurd number: keep
        return True
    return True


def clean_stale(path: str | os.PathLike, *, now: float | None = None) -> list[Path]:
    """Remove the temporaries of dead writers of ``path`` in its folder.

    Matches ``.NAME.tmp-*`` and ``.NAME.old-*`` (files or folders; this
    module's and :mod:`partplan.plan.store`'s names). One with a pid is removed
    when that process no longer runs; one without (an older partplan's
    ``.NAME.tmp-XXXXXXXX``, or ``.NAME.XXXXXXXX.tmp``) when it is older than
    :data:`STALE_SECONDS`. Returns the paths removed; never raises for a
    leftover it cannot remove.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / ".x.plan.tmp-999999999-abcd1234").mkdir()   # no such pid: a dead writer's
    >>> [p.name for p in clean_stale(d / "x.plan")]
    ['.x.plan.tmp-999999999-abcd1234']
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    name = re.escape(p.name)
    with_pid = re.compile(rf"^\.{name}\.(?:tmp|old)-(\d+)-[A-Za-z0-9_]+(?:\.[A-Za-z0-9]+)?$")
    legacy = re.compile(rf"^\.{name}\.(?:(?:tmp|old)-[A-Za-z0-9_]{{8}}|[A-Za-z0-9_]{{8}}\.tmp)$")
    now = time.time() if now is None else now
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    mine = f".{p.name}."
    for e in entries:
        if not e.name.startswith(mine):  # cheap filter: a folder of many files is scanned at C speed
            continue
        m = with_pid.match(e.name)
        if m:
            stale = not _pid_alive(int(m.group(1)))
        elif legacy.match(e.name):
            try:
                stale = now - e.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            except OSError:
                continue
        else:
            continue
        if not stale:
            continue
        try:
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path)
            else:
                os.unlink(e.path)
            removed.append(Path(e.path))
        except OSError:
            pass
    return removed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block ends without
    error it gets the mode ``open()`` would give (0666 & ~umask; mkstemp makes
    0600) and replaces ``path``. On error the temporary file is removed.
    Temporaries of dead writers of ``path`` are removed first (:func:`clean_stale`).

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "x.npy"
    >>> with atomic_path(out, suffix=".npy") as tmp:
    ...     np.save(tmp, np.arange(3))
    >>> np.load(out).tolist()
    [0, 1, 2]
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    clean_stale(p)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(p), suffix=suffix, dir=parent)
    os.close(fd)
    try:
        yield Path(tmp)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(obj, path: str | os.PathLike, *, indent: int = 1, **dump_kw) -> Path:
    """``json.dump(obj)`` to ``path`` atomically (with a trailing newline)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w") as fh:
            json.dump(obj, fh, indent=indent, **dump_kw)
            fh.write("\n")
    return Path(path)
