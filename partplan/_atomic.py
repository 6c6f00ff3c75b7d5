"""Atomic single-file output: write a temporary file in the target folder,
then ``os.replace`` it onto the name, so a reader never sees half a file and a
failure leaves the old file (or none) in place. Plans (directories) have their
own temp-dir + rename in :mod:`partplan.plan.store`.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block ends without
    error it gets the mode ``open()`` would give (0666 & ~umask; mkstemp makes
    0600) and replaces ``path``. On error the temporary file is removed.

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
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=suffix, dir=parent)
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
