"""Atomic single-file output: write a temporary file in the target folder,
then ``os.replace`` it onto the name, so a reader never sees half a file and a
failure leaves the old file (or none) in place. Plans (directories) have their
own temp-dir + rename in :mod:`partplan.plan.store`.

Temporary names carry the writer's process id (``.NAME.tmp-<pid>-XXXXXXXX``,
:func:`temp_prefix`), and the writer holds an advisory ``flock`` on each of
its temporaries (the file itself, or the temporary folder) for as long as it
writes (:func:`lock_temp`). The next write to ``NAME`` removes a leftover only
when nobody holds its lock (a writer killed with SIGKILL released it) and its
pid runs no process here (:func:`clean_stale`): a live writer in another pid
namespace (a container on a shared volume) holds its lock, so its temporary is
kept whatever its pid says. Leftovers without a pid (older partplan versions)
are removed once they are :data:`STALE_SECONDS` old.

Replacing a folder (a plan, a chunked graph) never loses the old one:
:func:`swap_dir` exchanges the two names in one step (``renameat2`` with
``RENAME_EXCHANGE``) where the kernel and file system allow it; elsewhere it
moves the old folder aside, moves the new one in, and moves the old one back
when that fails.

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
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import stat
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
        lock = None
        if m:
            lock = _try_lock(e.path)
            if lock is None:  # its writer holds the lock (or the lock cannot be judged): live
                continue
            stale = not _pid_alive(int(m.group(1)))
        elif legacy.match(e.name):
            try:
                stale = now - e.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            except OSError:
                continue
        else:
            continue
        try:
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
        finally:
            if lock is not None:
                os.close(lock)
    return removed


# ----------------------------------------------------------------------------- writer locks
# temporaries this process writes -> the descriptor holding their flock (closed when the temporary is
# committed or removed: release_temp)
_HELD: dict[str, int] = {}
_O_LOCK = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)


def lock_temp(tmp: str | os.PathLike, fd: int | None = None) -> None:
    """Hold a shared ``flock`` on the temporary ``tmp`` (a file or a folder)
    until :func:`release_temp`: the sign :func:`clean_stale` reads that its
    writer is alive, in whatever pid namespace. ``fd``: an open descriptor of
    ``tmp`` to lock (duplicated; the caller may close its own). Without flock
    (another OS, a file system that refuses it) the temporary is left
    unlocked and judged by its pid."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return
    try:
        lfd = os.dup(fd) if fd is not None else os.open(tmp, _O_LOCK)
    except OSError:
        return
    try:
        fcntl.flock(lfd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(lfd)
        return
    old = _HELD.pop(str(tmp), None)
    if old is not None:
        os.close(old)
    _HELD[str(tmp)] = lfd


def release_temp(tmp: str | os.PathLike) -> None:
    """Drop this process's lock on ``tmp`` (after it was renamed into place or removed)."""
    fd = _HELD.pop(str(tmp), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def discard_temp(tmp: str | os.PathLike) -> None:
    """Remove the temporary ``tmp`` (file or folder) and drop its lock; never raises."""
    try:
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.unlink(tmp)
    except OSError:
        pass
    release_temp(tmp)


@contextlib.contextmanager
def scratch_dir(name: str) -> Iterator[Path]:
    """A private folder for a native engine's hand-off files in the system's temporary folder
    (``.NAME.tmp-<pid>-*``, made by :func:`make_temp_dir`), removed on exit. A process killed
    inside it (a signal skips the exit) leaves it behind; the next call removes such leftovers of
    dead processes first (:func:`clean_stale`), as the launcher removes its workers' logged ones."""
    base = Path(tempfile.gettempdir()) / name
    clean_stale(base)
    tmp = make_temp_dir(base)
    try:
        yield tmp
    finally:
        discard_temp(tmp)


def make_temp_dir(path: str | os.PathLike) -> Path:
    """A new temporary folder for ``path`` in its folder (``mkdtemp``: mode
    0700, pid + random name, created exclusively), locked by this process
    (:func:`lock_temp`) and logged for the launcher. Remove it with
    :func:`discard_temp`; after it was renamed into place, :func:`release_temp`."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    try:
        tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(p), dir=parent))
    except OSError as exc:
        raise _create_error(p, exc) from None
    lock_temp(tmp)
    _log_temp(str(tmp))
    return tmp


def _try_lock(path: str) -> int | None:
    """An open descriptor holding the exclusive flock of ``path`` (its writer is
    gone), or None when a writer holds it or it cannot be judged (no flock:
    kept, judged again on the next write)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: pid only
        return os.open(os.devnull, os.O_RDONLY)
    try:
        fd = os.open(path, _O_LOCK)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


# ----------------------------------------------------------------------------- replacing a folder
RENAME_EXCHANGE = 2    # linux/fs.h
_AT_FDCWD = -100


def rename_exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap the names ``a`` and ``b`` (both must exist) in one atomic step:
    ``renameat2(..., RENAME_EXCHANGE)``. False where the C library, kernel or
    file system cannot (nothing was changed); any other failure raises
    OSError (nothing was changed either)."""
    fn = _renameat2()
    if fn is None:
        return False
    r = fn(_AT_FDCWD, os.fsencode(os.fspath(a)), _AT_FDCWD, os.fsencode(os.fspath(b)), RENAME_EXCHANGE)
    if r == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), os.fspath(a), None, os.fspath(b))


_RENAMEAT2 = []


def _renameat2():
    if not _RENAMEAT2:
        fn = None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
        except (OSError, AttributeError):
            fn = None
        _RENAMEAT2.append(fn)
    return _RENAMEAT2[0]


def swap_dir(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Put the finished folder ``tmp`` at ``path``, which exists (the caller
    checked it may be replaced), and remove the old folder. The old folder is
    never lost: :func:`rename_exchange` swaps the two in one step where
    possible; elsewhere the old folder is moved aside (into a locked
    ``.NAME.old-*`` temporary), the new one moved in, and on any failure of
    that second move the old one is moved back before the error is raised
    (OSError; ``tmp`` is then still the new folder, for the caller to remove).
    FileNotFoundError: ``path`` vanished meanwhile (nothing changed)."""
    tmp, path = Path(tmp), Path(path)
    if rename_exchange(tmp, path):
        if tmp.is_symlink():   # the old "folder" was a symbolic link: remove the link, never its target
            tmp.unlink()
        else:
            shutil.rmtree(tmp, ignore_errors=True)   # now the old folder
        return
    old = Path(tempfile.mkdtemp(prefix=temp_prefix(path, "old"), dir=path.parent))
    lock_temp(old)
    keep = False
    try:
        os.rename(path, old / "old")
        try:
            os.rename(tmp, path)
        except BaseException:
            try:
                os.rename(old / "old", path)
            except OSError:
                keep = True   # neither the new nor the old folder could go to path: keep the old one
                raise OSError(errno.EIO, f"{path} could not be replaced and the old folder could not be moved "
                                         f"back; it is kept at {old / 'old'}") from None
            raise
    finally:
        if keep:
            _HELD.pop(str(old), None)  # its lock stays held while this process runs
        else:
            shutil.rmtree(old, ignore_errors=True)
            release_temp(old)


# errno values that mean "no room for this file" (disk full, quota, file too large for the fs)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
JOB_DIR_ENV = "PARTPLAN_JOB_DIR"   # set by the launcher for its workers: temporaries are logged there


def _space_error(path, exc: OSError, nbytes: int | None = None):
    from .errors import OutputPathError
    need = "" if nbytes is None else f" ({nbytes} bytes needed)"
    return OutputPathError(f"{path}: not enough space in {Path(path).parent or '.'}{need}: "
                           f"{exc.strerror or exc}")


def _create_error(path, exc: OSError):
    """The one :class:`~partplan.errors.OutputPathError` for a temporary that
    could not be created next to ``path``: no space, or a folder that is
    read-only, not ours, missing or not a folder (EROFS, EACCES, EPERM,
    ENOENT, ENOTDIR...). Nothing was written, the old output is untouched."""
    from .errors import OutputPathError
    if exc.errno in _NO_SPACE:
        return _space_error(path, exc)
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    return OutputPathError(f"{path}: directory {parent} is not writable ({exc.strerror or exc}); nothing written")


def make_parents(path: str | os.PathLike) -> Path:
    """Create the missing folders above the output ``path`` (``mkdir -p`` of its parent) and return
    the parent; one :class:`~partplan.errors.OutputPathError` naming ``path`` and the first
    ancestor that is a file (``out.txt/x.plan``), or a folder that cannot be written, instead of
    ``FileExistsError`` / ``NotADirectoryError`` / ``PermissionError``.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "f").write_text("")
    0
    >>> make_parents(d / "a" / "b" / "x.npy") == d / "a" / "b"
    True
    >>> make_parents(d / "f" / "x.npy")
    Traceback (most recent call last):
    ...
    partplan.errors.OutputPathError: .../f/x.npy: .../f is a file, not a directory
    """
    from .errors import OutputPathError
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        q = parent
        while q != q.parent and not q.exists():
            q = q.parent
        if q.exists() and not q.is_dir():
            raise OutputPathError(f"{path}: {q} is a file, not a directory") from None
        if exc.errno in _NO_SPACE:
            raise _space_error(path, exc) from None
        raise OutputPathError(f"{path}: cannot create the directory {parent} ({exc.strerror or exc})") from None
    return parent


#: what torch's zip writer says when a write comes up short (a full disk): a RuntimeError, no errno
_TORCH_SHORT_WRITE = ("unexpected pos", "PytorchStreamWriter failed", "file write failed", "inline_container",
                      "iostream error")


def write_error(path, exc: BaseException):
    """The one :class:`~partplan.errors.OutputPathError` for a write into the
    temporary of ``path`` that failed: no space (ENOSPC, EDQUOT, EFBIG; numpy's
    short write ``N requested and M written``; torch's ``unexpected pos``),
    or any other OSError. None when ``exc`` is not a write failure (the
    caller re-raises it). The caller removes the temporary: the old output
    is kept."""
    from .errors import OutputPathError
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    if isinstance(exc, OSError):
        if exc.errno in _NO_SPACE:
            return OutputPathError(f"{path}: not enough space in {parent}: {exc.strerror}; nothing written")
        if exc.errno is None and "requested and" in str(exc):   # numpy's tofile on a full disk
            return OutputPathError(f"{path}: a write came up short ({exc}): not enough space in {parent}; "
                                   f"nothing written")
        return OutputPathError(f"{path}: cannot write in {parent} ({exc.strerror or exc}); nothing written")
    if isinstance(exc, RuntimeError) and any(s in str(exc) for s in _TORCH_SHORT_WRITE):
        return OutputPathError(f"{path}: torch could not write a file (a short write: not enough space in "
                               f"{parent}); nothing written")
    return None


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
            raise _create_error(p, exc) from None
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(f"{p}: no free temporary name")
    lock_temp(tmp, fd)
    _log_temp(str(tmp))
    if size:
        try:
            reserve(fd, int(size), p)
        except BaseException:
            os.close(fd)
            discard_temp(tmp)
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
    release_temp(tmp)
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
    make_parents(p)
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
        discard_temp(tmp)
        if exc.errno in _NO_SPACE:
            raise _space_error(p, exc) from None
        if exc.errno is None and "requested and" in str(exc):   # numpy's short write on a full disk
            raise write_error(p, exc) from None
        raise
    except RuntimeError as exc:   # torch's zip writer on a full disk
        discard_temp(tmp)
        err = write_error(p, exc)
        if err is not None:
            raise err from None
        raise
    except BaseException:
        discard_temp(tmp)
        raise


# ----------------------------------------------------------------------------- a shared .npy output
def create_npy(path: str | os.PathLike, dtype, shape: tuple[int, ...]) -> tuple[Path, tuple[int, int]]:
    """A new temporary ``.npy`` for ``path`` holding a ``shape`` array of
    ``dtype`` (header written, data space reserved up front, zero-filled);
    returns (temporary path, (st_dev, st_ino)). Other processes open it with
    :func:`open_npy` and write their rows; one of them calls :func:`commit`.
    A full disk raises :class:`~partplan.errors.OutputPathError` here, before
    any work. Temporaries of dead writers of ``path`` are removed first
    (:func:`clean_stale`)."""
    import numpy as np
    clean_stale(path)
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
        discard_temp(tmp)
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


def write_npy_rows(tmp: str | os.PathLike, dtype, shape: tuple[int, ...], ident: tuple | None, ids, rows) -> None:
    """Set rows ``ids`` of the temporary ``.npy`` made by :func:`create_npy` to ``rows``, checked as
    :func:`open_npy` checks it, a window of rows at a time (:func:`partplan._rowio.write_rows_at`:
    the writer holds one window of the file, not the pages of every row it wrote)."""
    import numpy as np

    from ._rowio import write_rows_at
    fd, offset = _open_checked_npy(tmp, dtype, shape, ident)
    try:
        if int(np.prod(shape, dtype=object)) == 0:
            return
        with os.fdopen(os.dup(fd), "r+b") as fh:
            write_rows_at(fh, offset, tuple(shape), dtype, ids, rows)
    finally:
        os.close(fd)


def _open_checked_npy(tmp, dtype, shape, ident) -> tuple[int, int]:
    """(an open read-write descriptor, the data's byte offset) of the temporary ``.npy``, with
    :func:`open_npy`'s checks (O_NOFOLLOW, the same file, its header); the caller closes it."""
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
    except BaseException:
        os.close(fd)
        raise
    return fd, len(header)


def open_npy(tmp: str | os.PathLike, dtype, shape: tuple[int, ...], ident: tuple | None = None):
    """Memory-map (read-write) the temporary ``.npy`` made by :func:`create_npy`:
    opened with ``O_NOFOLLOW`` and, with ``ident`` = (st_dev, st_ino), only if
    it is still that file (st_dev None: the inode alone, for a process on
    another node of a shared file system; a symlink or swapped file is refused with
    :class:`~partplan.errors.OutputPathError`). Its header must say ``dtype`` and
    ``shape``."""
    import numpy as np

    dt = np.dtype(dtype)
    fd, offset = _open_checked_npy(tmp, dtype, shape, ident)
    try:
        if int(np.prod(shape, dtype=object)) == 0:  # mmap refuses an empty range: nothing to write anyway
            return np.zeros(tuple(shape), dtype=dt)
        with os.fdopen(os.dup(fd), "r+b") as fh:
            return np.memmap(fh, dtype=dt, mode="r+", offset=offset, shape=tuple(shape))
    finally:
        os.close(fd)


def write_json_atomic(obj, path: str | os.PathLike, *, indent: int = 1, **dump_kw) -> Path:
    """``json.dump(obj)`` to ``path`` atomically (with a trailing newline)."""
    with atomic_path(path) as tmp:
        with open(tmp, "w") as fh:
            json.dump(obj, fh, indent=indent, **dump_kw)
            fh.write("\n")
    return Path(path)
