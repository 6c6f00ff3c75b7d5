"""Atomic single-file output: write a temporary file in the target folder,
then ``os.replace`` it onto the name, so a reader never sees half a file and a
failure leaves the old file (or none) in place. Plans (directories) have their
own temp-dir + rename in :mod:`partplan.plan.store`.

Temporary names carry the writer's process id (``.NAME.tmp-<pid>-XXXXXXXX``,
:func:`temp_prefix`), so the next write to ``NAME`` can tell the leftovers of
a writer killed with SIGKILL (its pid no longer runs) from a live concurrent
writer, and remove them (:func:`clean_stale`). Leftovers without a pid (older
partplan versions) are removed once they are :data:`STALE_SECONDS` old.

Trust: a temporary is created with ``O_CREAT | O_EXCL`` under a
name that carries the pid and random characters (a planted file or symlink at
a predictable name makes the create fail and another name is drawn, never a
write through the link); its mode is set on the open descriptor; before the
rename the name must still be the regular file this writer created (same
inode), so a temporary swapped for a symlink is refused. Where the final size
is known (``size=``, :func:`create_npy`) the space is reserved up front with
``posix_fallocate``: a full disk is one :class:`~partplan.errors.OutputPathError`
before any work, and a memory-mapped output never dies of SIGBUS. A write
that runs out of space is one ``OutputPathError`` too. The data is fsynced
before the rename. Inside a job started by :func:`partplan.runtime.launch.launch`
(``$PARTPLAN_JOB_DIR`` set) every temporary's path is logged to the job
folder, so the launcher removes the temporaries of workers it had to kill.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
import stat
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
    try:  # a zombie (killed, not yet reaped by whoever inherited it) writes nothing more
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
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


# errno values that mean "no room for this file" (disk full, quota, file too large for the fs)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
JOB_DIR_ENV = "PARTPLAN_JOB_DIR"   # set by the launcher for its workers: temporaries are logged there


def _space_error(path, exc: OSError, nbytes: int | None = None):
    from .errors import OutputPathError
    need = "" if nbytes is None else f" ({nbytes} bytes needed)"
    return OutputPathError(f"{path}: not enough space in {Path(path).parent or '.'}{need}: "
                           f"{exc.strerror or exc}")


def _log_temp(tmp: str) -> None:
    """Append ``tmp`` to the launcher's list of this job's temporaries (one line)."""
    d = os.environ.get(JOB_DIR_ENV)
    if not d:
        return
    try:
        fd = os.open(os.path.join(d, "temps"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, (tmp + "\n").encode(errors="surrogateescape"))
        finally:
            os.close(fd)
    except OSError:
        pass


def create_temp(path: str | os.PathLike, *, suffix: str = ".tmp", size: int | None = None) -> tuple[int, Path]:
    """Create a new temporary for ``path`` in its folder: ``O_CREAT|O_EXCL|O_NOFOLLOW``,
    mode 0600, named ``.NAME.tmp-<pid>-<16 random hex><suffix>`` (a name that
    exists, a planted symlink included, is skipped: the link is never
    followed). ``size`` (bytes): reserved with ``posix_fallocate`` (a full disk
    raises :class:`~partplan.errors.OutputPathError` and removes the temporary).
    Returns (open read-write descriptor, path); the caller closes it."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = parent / f"{temp_prefix(p)}{secrets.token_hex(8)}{suffix}"
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                raise _space_error(p, exc) from None
            raise
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(f"{p}: no free temporary name")
    _log_temp(str(tmp))
    if size:
        try:
            reserve(fd, int(size), p)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return fd, tmp


def reserve(fd: int, nbytes: int, path="the output") -> None:
    """Reserve ``nbytes`` bytes for the open file ``fd`` (``posix_fallocate``);
    a full disk or quota is one :class:`~partplan.errors.OutputPathError`
    naming ``path``. File systems without fallocate are left as they are."""
    if nbytes <= 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, int(nbytes))
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise _space_error(path, exc, nbytes) from None
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


def _same_file(tmp: Path, ident: tuple[int, int]) -> bool:
    try:
        st = os.lstat(tmp)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == ident


def commit(tmp: str | os.PathLike, path: str | os.PathLike, ident: tuple[int, int] | None = None) -> Path:
    """fsync ``tmp``, give it the mode ``open()`` would (0666 & ~umask), check
    it is still the regular file ``ident`` = (st_dev, st_ino) when given, and
    rename it onto ``path``. Raises OSError / OutputPathError; the caller
    removes ``tmp`` on failure."""
    from .errors import OutputPathError
    tmp, p = Path(tmp), Path(path)
    try:
        fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOENT):
            raise OutputPathError(f"{p}: its temporary {tmp.name} was replaced or removed while it was written; "
                                  f"nothing written") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (ident is not None and (st.st_dev, st.st_ino) != ident):
            raise OutputPathError(f"{p}: its temporary {tmp.name} was replaced by another file while it "
                                  f"was written; nothing written")
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                raise _space_error(p, exc) from None
            raise
    finally:
        os.close(fd)
    if ident is not None and not _same_file(tmp, ident):
        raise OutputPathError(f"{p}: its temporary {tmp.name} was replaced while it was written; nothing written")
    os.replace(tmp, p)
    return p


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, suffix: str = ".tmp", size: int | None = None) -> Iterator[Path]:
    """Yield a new temporary path next to ``path`` (:func:`create_temp`:
    ``O_EXCL``, pid + random name, never a symlink; ``size`` bytes reserved
    up front when given); when the block ends without error the file is
    fsynced, gets the mode ``open()`` would give (0666 & ~umask), must still
    be the file created (not swapped for a link), and replaces ``path``. On
    error the temporary file is removed; running out of space while writing
    is one :class:`~partplan.errors.OutputPathError`. Temporaries of dead
    writers of ``path`` are removed first (:func:`clean_stale`).

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
    fd, tmp = create_temp(p, suffix=suffix, size=size)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    try:
        yield tmp
        commit(tmp, p, (st.st_dev, st.st_ino))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno in _NO_SPACE:
            raise _space_error(p, exc) from None
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ----------------------------------------------------------------------------- a shared .npy output
def create_npy(path: str | os.PathLike, dtype, shape: tuple[int, ...]) -> tuple[Path, tuple[int, int]]:
    """A new temporary ``.npy`` for ``path`` holding a ``shape`` array of
    ``dtype`` (header written, data space reserved up front, zero-filled);
    returns (temporary path, (st_dev, st_ino)). Other processes open it with
    :func:`open_npy` and write their rows; one of them calls :func:`commit`.
    A full disk raises :class:`~partplan.errors.OutputPathError` here, before
    any work."""
    import numpy as np
    dt = np.dtype(dtype)
    header = _npy_header(dt, shape)
    nbytes = len(header) + int(np.prod(shape, dtype=object)) * dt.itemsize
    fd, tmp = create_temp(path, suffix=".npy", size=nbytes)
    try:
        os.pwrite(fd, header, 0)
        os.ftruncate(fd, nbytes)
        st = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno in _NO_SPACE:
            raise _space_error(path, exc, nbytes) from None
        raise
    os.close(fd)
    return tmp, (st.st_dev, st.st_ino)


def _npy_header(dt, shape) -> bytes:
    import io

    import numpy as np
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(dt),
                                                "fortran_order": False, "shape": tuple(int(s) for s in shape)})
    return buf.getvalue()


def open_npy(tmp: str | os.PathLike, dtype, shape: tuple[int, ...], ident: tuple | None = None):
    """Memory-map (read-write) the temporary ``.npy`` made by :func:`create_npy`:
    opened with ``O_NOFOLLOW`` and, with ``ident`` = (st_dev, st_ino), only if
    it is still that file (st_dev None: the inode alone, for a process on
    another node of a shared file system; a symlink or swapped file is refused with
    :class:`~partplan.errors.OutputPathError`). Its header must say ``dtype`` and
    ``shape``."""
    import numpy as np

    from .errors import OutputPathError
    dt = np.dtype(dtype)
    header = _npy_header(dt, shape)
    fd = os.open(tmp, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (ident is not None and (st.st_ino != ident[1] or ident[0] not in (None, st.st_dev))):
            raise OutputPathError(f"{tmp}: not the output temporary this job created; nothing written")
        if os.pread(fd, len(header), 0) != header:
            raise OutputPathError(f"{tmp}: the output temporary's header changed; nothing written")
        if int(np.prod(shape, dtype=object)) == 0:  # mmap refuses an empty range: nothing to write anyway
            return np.zeros(tuple(shape), dtype=dt)
        with os.fdopen(os.dup(fd), "r+b") as fh:
            return np.memmap(fh, dtype=dt, mode="r+", offset=len(header), shape=tuple(shape))
    finally:
        os.close(fd)


def write_json_atomic(obj, path: str | os.PathLike, *, indent: int = 1, **dump_kw) -> Path:
    """``json.dump(obj)`` to ``path`` atomically (with a trailing newline)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w") as fh:
            json.dump(obj, fh, indent=indent, **dump_kw)
            fh.write("\n")
    return Path(path)
