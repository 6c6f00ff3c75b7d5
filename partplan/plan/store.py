"""Write and read plan directories (Arrow IPC shards + JSON manifest).

pyarrow does the file format (``pyarrow.ipc`` file format, uncompressed so it can
be memory-mapped) and the memory mapping (``pyarrow.memory_map``); this module
only lays the arrays out, checksums them (sha256, hashlib; per-rank data shares
also xxh3_128, :mod:`xxhash`, checked while they are copied) and checks what it
reads. Writing is atomic: everything goes to a temporary sibling directory that
is renamed into place at the end, so a reader never sees half a plan.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import mmap
import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

try:  # a dependency; without it a share's xxh3_128 is not checked and its sha256 is (slower)
    import xxhash as _xxhash
except ImportError:  # pragma: no cover - depends on the environment
    _xxhash = None

from .. import _atomic
from .._atomic import clean_stale, discard_temp, make_parents, make_temp_dir, release_temp
from .._files import json_default
from ..errors import PlanError
from ..program.plan import Plan, RankPlan
from ..layouts import layout_from_manifest, parse_layout
from ..program.checks import MAX_F, check_manifest
from ..io.arrowcheck import IpcProblem, ipc_batches
from ..io.trust import load_json, printable, source_date_epoch
from ..program.checks import shard_problems
from ..program.schema import FORMAT, MANIFEST, PARTITION_FILE, REBUILD_HINT, SUPPORTED_VERSIONS, shard_name

_META_KEY = b"partplan"
_MAX_MANIFEST_BYTES = 256 << 20   # bytes; a manifest of 10^4 ranks' pairs is far smaller
_PLAN_ENTRY = re.compile(r"^(?:manifest\.json|partition\.arrow|(?:rank|share)-\d{5,}\.arrow)$")


# ----------------------------------------------------------------------------- arrow encoding
def _table(arrays: dict[str, np.ndarray], meta: dict) -> pa.RecordBatch:
    """One record batch, one row; each array is the single list of a large_list column."""
    cols, names = [], []
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        if a.dtype.kind in "iu":
            a = a.astype(np.int64, copy=False)
        elif a.dtype.kind == "f":
            a = a.astype(np.float64, copy=False)
        else:
            raise PlanError(f"field {name!r}: unsupported dtype {a.dtype}")
        offsets = pa.array(np.array([0, a.size], dtype=np.int64))
        cols.append(pa.LargeListArray.from_arrays(offsets, pa.array(a)))
        names.append(name)
    schema = pa.schema([pa.field(nm, c.type, nullable=False) for nm, c in zip(names, cols)],
                       metadata={_META_KEY: json.dumps(meta, sort_keys=True).encode()})
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _write_arrow(path: Path, arrays: dict, meta: dict) -> tuple[int, str]:
    batch = _table(arrays, meta)
    with pa.OSFile(str(path), "wb") as sink:
        with ipc.new_file(sink, batch.schema) as writer:
            writer.write_batch(batch)
    return path.stat().st_size, _sha256(path)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


#: the manifest field of a file's fast checksum (xxh3_128, hex), beside its ``sha256``
FAST_DIGEST = "xxh3_128"
_HEX32 = re.compile(r"^[0-9a-f]{32}$")


def _digests(path: Path) -> dict:
    """``{"sha256": hex, "xxh3_128": hex}`` of a file, read once (no xxh3_128 without :mod:`xxhash`)."""
    h = hashlib.sha256()
    x = _xxhash.xxh3_128() if _xxhash is not None else None
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
            if x is not None:
                x.update(chunk)
    return {"sha256": h.hexdigest(), **({FAST_DIGEST: x.hexdigest()} if x is not None else {})}


def fast_digest(entry: dict, where: str) -> str | None:
    """The ``xxh3_128`` a manifest entry records (32 lowercase hex digits), or None when it records
    none (files written before it existed: their ``sha256`` is checked instead) or :mod:`xxhash` is
    not installed. One PlanError naming ``where`` when the field is there but malformed."""
    want = entry.get(FAST_DIGEST)
    if want is None:
        return None
    if not isinstance(want, str) or not _HEX32.match(want):
        raise PlanError(f"{where}: field {FAST_DIGEST!r} = {printable(repr(want))[:40]} is not 32 hex digits")
    return want if _xxhash is not None else None


def _open_plain(path: Path, what: str) -> tuple[int, os.stat_result]:
    """(fd, fstat) of a regular file of a plan, opened without following a
    symbolic link (``O_NOFOLLOW``): a plan's files are its own, a link could
    point anywhere. One PlanError naming the file otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)   # non-blocking: a FIFO in a plan never blocks the open
    except FileNotFoundError:
        raise PlanError(f"{path}: {what} is missing (manifest lists it)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise PlanError(f"{path}: {what} is a symbolic link; a plan's files must be regular files "
                            f"(refusing to follow it)") from None
        raise PlanError(f"{path}: {what} cannot be opened ({exc.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        from ..io._common import file_kind
        raise PlanError(f"{path}: {what} is {file_kind(st.st_mode)}, not a regular file")
    return fd, st


class _Mapped:
    """A plan file opened by :func:`_open_plain` and memory-mapped read-only
    (``buf``: a pyarrow buffer over the map; empty files map to an empty buffer)."""

    def __init__(self, path: Path, what: str):
        fd, st = _open_plain(path, what)
        try:
            self.size = st.st_size
            self.mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if st.st_size else None
        except (OSError, ValueError) as exc:
            raise PlanError(f"{path}: {what} cannot be mapped ({exc})") from None
        finally:
            os.close(fd)
        self.buf = pa.py_buffer(self.mm) if self.mm is not None else pa.py_buffer(b"")

    #: bytes hashed or copied before their pages of the map are handed back
    BLOCK = 32 << 20

    def release(self, lo: int, hi: int) -> None:
        """Hand the map's pages of bytes [lo, hi) back to the kernel: they are clean file pages, a later
        read faults them in again from the page cache, and meanwhile they do not count in this
        process's memory (where the platform has ``madvise``)."""
        if self.mm is None or not hasattr(self.mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        lo, hi = (lo // page) * page, min(-(-hi // page) * page, self.size)
        if hi > lo:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
            except (OSError, ValueError):
                pass

    def sha256(self) -> str:
        """The file's sha256, hashed a block at a time, each block's pages released once hashed (a
        check never holds the whole file resident)."""
        h = hashlib.sha256()
        if self.mm is not None:
            view = memoryview(self.mm)
            try:
                for lo in range(0, self.size, self.BLOCK):
                    h.update(view[lo:lo + self.BLOCK])
                    self.release(lo, lo + self.BLOCK)
            finally:
                view.release()
        return h.hexdigest()

    #: bytes copied, hashed and range-checked at a time by :meth:`copy_checked` (while in the cache)
    STEP = 1 << 20

    def copy_checked(self, views: list[np.ndarray], *, digest: bool = False,
                     limits: list[list[tuple[int, int]]] | None = None
                     ) -> tuple[list[np.ndarray], str | None, list[list[int]]]:
        """Writable copies of ``views`` (1-D contiguous arrays into this map), made in one pass over the
        file, :attr:`STEP` bytes at a time, each step's pages of the map handed back once copied.

        digest : also the xxh3_128 (hex) of the whole file, every byte of it in file order: the bytes
            of an array hashed from its copy just written (still in the cache), the bytes between
            arrays (headers, offsets, footer) from the map. None without it.
        limits : per view, ``(lo, hi)`` element ranges of an 8-byte integer array whose largest value
            read as uint64 is wanted (a negative value reads as 2^63 or more, so one comparison with
            ``max < bound`` checks ``0 <= x < bound``); computed on each step's copy while it is in
            the cache. Returns ``maxima[i][j]`` (-1 for an empty range).

        Returns ``(copies, digest, maxima)``."""
        limits = limits if limits is not None else [[] for _ in views]
        copies = [np.empty(a.shape, dtype=a.dtype) for a in views]
        maxima = [[-1] * len(lim) for lim in limits]
        base = self.buf.address
        spans = []
        for i, a in enumerate(views):
            if a.size:
                start = a.__array_interface__["data"][0] - base
                if a.ndim != 1 or not a.flags.c_contiguous or start < 0 or start + a.nbytes > self.size:
                    raise ValueError("copy_checked takes 1-D contiguous views into the map")
                spans.append((start, start + a.nbytes, i))
        spans.sort()
        overlap = any(spans[j][0] < spans[j - 1][1] for j in range(1, len(spans)))
        h = _xxhash.xxh3_128() if digest else None
        if h is not None and overlap:   # never in a file partplan wrote: hash it whole first, then copy
            self._hash_span(h, 0, self.size)
            hash_copies, h_out = False, h.hexdigest()
        else:
            hash_copies, h_out = h is not None, None
        at = 0
        for start, end, i in spans:
            if hash_copies and start > at:
                self._hash_span(h, at, start)
            src, dst = views[i], copies[i]
            s8, d8 = src.view(np.uint8), dst.view(np.uint8)
            isz = src.itemsize
            step = max(isz, (self.STEP // isz) * isz)
            for lo in range(0, src.nbytes, step):
                hi = min(src.nbytes, lo + step)
                d8[lo:hi] = s8[lo:hi]
                self.release(start + lo, start + hi)
                if hash_copies:
                    h.update(d8[lo:hi])
                for j, (elo, ehi) in enumerate(limits[i]):
                    a_, b_ = max(elo, lo // isz), min(ehi, hi // isz)
                    if a_ < b_:
                        mx = int(dst[a_:b_].view(np.uint64).max())
                        if mx > maxima[i][j]:
                            maxima[i][j] = mx
            at = max(at, end)
        if hash_copies:
            self._hash_span(h, at, self.size)
            h_out = h.hexdigest()
        return copies, h_out, maxima

    def xxh3_128(self) -> str:
        """The whole file's xxh3_128 (hex), a block at a time, each block's pages released once hashed."""
        h = _xxhash.xxh3_128()
        self._hash_span(h, 0, self.size)
        return h.hexdigest()

    def _hash_span(self, h, lo: int, hi: int) -> None:
        if self.mm is None or hi <= lo:
            return
        view = memoryview(self.mm)
        try:
            for a in range(lo, hi, self.BLOCK):
                b = min(hi, a + self.BLOCK)
                h.update(view[a:b])
                if b - a >= mmap.PAGESIZE:
                    self.release(a, b)
        finally:
            view.release()

    def copy_out(self, a: np.ndarray) -> np.ndarray:
        """A writable copy of ``a`` (a view into this map), made a block at a time, each block's pages
        released once copied: the copy and the map are never both resident."""
        out = np.empty(a.shape, dtype=a.dtype)
        if a.size == 0:
            return out
        flat_in, flat_out = a.reshape(-1), out.reshape(-1)
        start = a.__array_interface__["data"][0] - self.buf.address
        step = max(1, self.BLOCK // max(1, a.itemsize))
        for lo in range(0, flat_in.size, step):
            hi = min(flat_in.size, lo + step)
            flat_out[lo:hi] = flat_in[lo:hi]
            if 0 <= start < self.size:
                self.release(start + lo * a.itemsize, start + hi * a.itemsize)
        return out


def _parse_arrow(path: Path, buf, what: str = "shard") -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) of an Arrow IPC file in ``buf`` (``what`` names it in errors: shard, share,
    partition file), arrays zero-copy views.

    Before pyarrow reads the batch, its footer and message header are read
    here (:func:`partplan.io.arrowcheck.ipc_batches`): one record batch,
    buffers inside their body, none compressed (a plan's shards are written
    uncompressed; a compressed buffer could claim any size). The batch is
    then validated in full (every array's declared length against its
    buffers, offsets in range) before any value is touched."""
    try:
        batches = ipc_batches(buf)
    except IpcProblem as exc:
        raise PlanError(f"{path}: unreadable Arrow {what} ({exc})") from None
    if len(batches) != 1:
        raise PlanError(f"{path}: expected 1 record batch, found {len(batches)}")
    if batches[0].compressed:
        raise PlanError(f"{path}: its buffers are compressed (they claim {batches[0].decompressed_bytes} bytes); "
                        f"a plan's shards are stored uncompressed, refusing to decompress them")
    try:
        reader = ipc.open_file(buf)
        if reader.num_record_batches != 1:
            raise PlanError(f"{path}: expected 1 record batch, found {reader.num_record_batches}")
        batch = reader.get_batch(0)
        batch.validate(full=True)
        raw = (reader.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise PlanError(f"{path}: schema metadata 'partplan' is missing (not a partplan shard)")
        meta = load_json(raw, f"{path}: schema metadata 'partplan'")
        if not isinstance(meta, dict):
            raise PlanError(f"{path}: schema metadata 'partplan' is not an object")
        arrays = {}
        for name, col in zip(batch.schema.names, batch.columns):
            if not pa.types.is_large_list(col.type) or len(col) != 1 or col.null_count:
                raise PlanError(f"{path}: field {printable(name)!r} is not a one-row large_list column")
            vals = col.values
            if not (pa.types.is_integer(vals.type) or pa.types.is_floating(vals.type)) or vals.null_count:
                raise PlanError(f"{path}: field {printable(name)!r} holds {vals.type}, not int64 or float64 values")
            arrays[name] = vals.to_numpy(zero_copy_only=True)
        return meta, arrays
    except PlanError:
        raise
    except (pa.ArrowException, OSError, ValueError, TypeError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: unreadable Arrow {what} ({printable(exc)})") from exc


def _read_arrow(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) from a shard, arrays zero-copy views of a memory map
    (the file opened without following a symbolic link)."""
    return _parse_arrow(path, _Mapped(Path(path), "Arrow file").buf, "file")


# ----------------------------------------------------------------------------- write
def is_plan_dir(path: Path) -> str | None:
    """Why the existing directory ``path`` is not a partplan plan that a new
    plan may replace (None: it is one). A plan directory holds only regular
    files named ``manifest.json``, ``partition.arrow``, ``rank-NNNNN.arrow`` and
    ``share-NNNNN.arrow`` (:mod:`partplan.nn.shares`),
    and its manifest says ``"format": "partplan-plan"``; anything else (a
    sub-directory, a link, another file) means the directory is not ours to
    delete."""
    try:
        entries = list(os.scandir(path))
    except OSError as exc:
        return f"cannot be listed ({exc.strerror})"
    if not entries:
        return None
    for e in entries:
        if not _PLAN_ENTRY.match(e.name):
            return f"holds {printable(e.name)!r}, which is no file of a plan"
        if e.is_symlink() or not e.is_file(follow_symlinks=False):
            return f"holds {printable(e.name)!r}, which is not a regular file"
    try:
        fd, st = _open_plain(path / MANIFEST, "manifest")
    except PlanError:
        return "has no manifest.json"
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            head = fh.read(min(st.st_size, _MAX_MANIFEST_BYTES))
    finally:
        os.close(fd)
    try:
        fmt = load_json(head, "manifest").get("format")
    except (PlanError, AttributeError):
        fmt = None
    if fmt != FORMAT:
        return f"has a manifest.json whose 'format' is not {FORMAT!r}"
    return None


@contextlib.contextmanager
def _dir_lock(parent: Path):
    """Serialize the swap of concurrent partplan writers in ``parent`` (an
    advisory ``flock`` on the directory itself: nothing is created, nothing
    left behind). Where flock is unavailable, no lock (the swap still never
    deletes a foreign directory)."""
    try:
        import fcntl
        fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # closing releases the lock


class Progress:
    """A heartbeat on a stream (stderr by default) while a long plan is built
    or written: ``progress(what, done, total)`` prints ``partplan: WHAT
    DONE/TOTAL`` at most every ``every_s`` seconds (and the last call), so a
    user waiting on a large plan sees it move. Pass an instance (or any
    callable with that signature) as ``progress=``; None or a quiet caller
    prints nothing."""

    def __init__(self, stream=None, every_s: float = 2.0):
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = float(every_s)
        self._last = -float("inf")

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < self.every_s:
            return
        self._last = now
        print(f"partplan: {what} {done}/{total}", file=self.stream, flush=True)


ProgressFn = Callable[[str, int, int], None]


def stamp_created(manifest: dict, created: str | None | bool) -> None:
    """Set ``manifest["created"]``: ``created`` as given (ISO 8601 UTC), now
    (or ``$SOURCE_DATE_EPOCH``) for None, nothing for False."""
    if created is None:
        epoch = source_date_epoch()   # one OptionError naming the variable when malformed
        now = (_dt.datetime.fromtimestamp(epoch, _dt.timezone.utc) if epoch is not None
               else _dt.datetime.now(_dt.timezone.utc))
        created = now.replace(microsecond=0).isoformat()
    if created is not False:
        manifest["created"] = created


def write_plan(plan: Plan, path, *, created: str | None | bool = None,
               progress: ProgressFn | None = None) -> Path:
    """Write ``plan`` as a directory at ``path`` (atomically; replaces an existing plan).

    created : the manifest's creation time (ISO 8601 UTC). Default: now, or
        ``$SOURCE_DATE_EPOCH`` when set; ``False`` leaves it out. Shard and
        partition bytes never depend on it: two builds of the same input write
        identical shards and manifests that differ only in ``created``.
    progress : called as ``progress("writing plan shards", done, total)``
        after each shard (e.g. :class:`Progress`, a heartbeat on stderr);
        None (the default) is silent.

    ``path`` may be missing, an empty directory or a partplan plan
    (:func:`is_plan_dir`); anything else is refused and left untouched. Missing folders above it
    are created (as every partplan writer does).
    Everything is written to a fresh temporary sibling (``mkdtemp``: pid +
    random, created exclusively) and renamed into place; concurrent writers
    of one plan each end with a complete plan in place (the last rename wins)
    or one PlanError, and leave no temporaries.
    Returns the plan directory path.
    """
    from .._args import check_path
    if not isinstance(getattr(plan, "manifest", None), dict) or not hasattr(plan, "ranks"):
        raise PlanError(f"write_plan: plan must be a Plan (what build_plan returns), got {type(plan).__name__}")
    path = Path(check_path("path", path, error=PlanError))
    f = plan.manifest.get("f")
    if isinstance(f, int) and not 1 <= f <= MAX_F:   # the writer never writes what a reader refuses
        raise PlanError(f"{path}: a plan for f = {f} feature columns; plans are for f in [1, {MAX_F}]")
    tmp = begin_plan_dir(path)
    try:
        shards = []
        total = len(plan.ranks) + 1
        for i, rp in enumerate(plan.ranks):
            shards.append(write_shard(tmp, rp))
            if progress is not None:
                progress("writing plan shards", i + 1, total)
        garr = {"part": plan.part}
        if plan.owner is not None:
            garr["owner"] = plan.owner
        if plan.perm is not None:
            garr["perm"] = plan.perm
        m = finish_plan_dir(tmp, path, plan.manifest, garr, shards, created=created)
        if progress is not None:
            progress("writing plan shards", total, total)
    except OSError as exc:   # a full disk, a quota, an I/O error while writing the temporary
        discard_temp(tmp)
        if exc.errno in _atomic._NO_SPACE:
            raise _atomic._space_error(path, exc) from None
        raise PlanError(f"{path}: the plan could not be written ({printable(exc.strerror or exc)}); "
                        f"the old plan, if any, is unchanged") from None
    except BaseException:
        discard_temp(tmp)
        raise
    plan.manifest = m
    return path


# the three steps of write_plan, also taken by writers that hold no whole Plan (the distributed build)
def begin_plan_dir(path: Path) -> Path:
    """The temporary sibling directory a plan for ``path`` is written into
    (``path`` checked: missing, an empty directory or a plan; temporaries of
    killed writers removed)."""
    _check_target(path)
    make_parents(path)
    clean_stale(path)  # temp dirs of writers killed before their rename
    return make_temp_dir(path)   # locked while this process writes it


def write_shard(tmp: Path, rp: RankPlan) -> dict:
    """Write rank plan ``rp`` as its shard in ``tmp``; returns its manifest entry."""
    name = shard_name(rp.rank)
    size, digest = _write_arrow(tmp / name, rp.arrays, rp.meta)
    return {"rank": rp.rank, "file": name, "bytes": size, "sha256": digest,
            **{k: v for k, v in rp.summary().items() if k != "rank"}}


def finish_plan_dir(tmp: Path, path: Path, manifest: dict, partition: dict, shards: list[dict], *,
                    created: str | None | bool = None) -> dict:
    """Write the partition file (``partition``: its arrays) and the manifest
    (``manifest`` + tool, ``created``, the partition file's and ``shards``'
    entries) into ``tmp``, then rename ``tmp`` onto ``path`` (an existing
    plan is replaced without ever being lost: :func:`partplan._atomic.swap_dir`).
    Returns the manifest written. The caller removes ``tmp`` on failure
    (:func:`partplan._atomic.discard_temp`)."""
    m = dict(manifest)
    from .._version import __version__
    m["tool"] = {"name": "partplan", "version": __version__}
    stamp_created(m, created)
    size, digest = _write_arrow(tmp / PARTITION_FILE, partition,
                                {"graph_fingerprint": m["graph"]["fingerprint"], "k": m["k"]})
    m["partition_file"] = {"file": PARTITION_FILE, "bytes": size, "sha256": digest}
    m["shards"] = shards
    check_manifest(m, path / MANIFEST, parse_layout)   # what every reader checks: never written when it fails
    with open(tmp / MANIFEST, "w") as fh:
        fh.write(manifest_text(m))
    os.chmod(tmp, 0o755)
    _swap_in(tmp, path)
    return m


def check_plan_target(path) -> Path:
    """What :func:`write_plan` checks before it writes, for callers that check before long work:
    ``path`` is missing, an empty directory or a plan, and its folder exists or can be created
    (PlanError / OutputPathError naming it). Returns ``Path(path)``."""
    from .._args import check_path
    from ..io.outpath import check_output_folder
    path = Path(check_path("path", path, error=PlanError))
    _check_target(path)
    check_output_folder(path.parent if str(path.parent) else Path("."))
    return path


def _check_target(path: Path) -> None:
    """``path`` may be replaced by a plan: missing, an empty directory or a plan."""
    if os.path.islink(path):
        raise PlanError(f"{path}: is a symbolic link; refusing to replace it with a plan")
    if path.is_file():
        raise PlanError(f"{path}: exists and is not a plan directory; refusing to overwrite it")
    if path.is_dir():
        why = is_plan_dir(path)
        if why is not None:
            raise PlanError(f"{path}: exists and is not a plan directory ({why}); refusing to overwrite it")


def _swap_in(tmp: Path, path: Path) -> None:
    """Rename the finished plan ``tmp`` onto ``path`` (under the parent's lock,
    the target checked again inside it: another writer may have put a plan
    there meanwhile, never something else). An existing plan is exchanged
    for the new one in one step where the platform allows, else moved aside
    and moved back on any failure (:func:`partplan._atomic.swap_dir`): a
    failure leaves the old plan at ``path``, never nothing."""
    with _dir_lock(path.parent):
        for _ in range(8):
            _check_target(path)
            try:
                if not os.path.lexists(path):
                    os.rename(tmp, path)  # an empty directory at path is replaced too
                else:
                    _atomic.swap_dir(tmp, path)
            except FileNotFoundError:
                continue  # gone meanwhile: check again
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    continue  # a concurrent writer (without the lock) got there first: check again
                raise PlanError(f"{path}: the new plan could not be moved into place "
                                f"({printable(exc.strerror or exc)}); the old plan, if any, is unchanged") from None
            release_temp(tmp)
            return
        raise PlanError(f"{path}: other writers kept replacing the plan; gave up after 8 tries")


_PAIRS_TOKEN = "partplan-step-pairs-"


def manifest_text(m: dict) -> str:
    """The manifest as written: JSON, ``indent=1``, keys sorted, each step's ``pairs`` on one line.
    The pairs (up to k² of them) are encoded by the json module's compiled encoder, which an
    indented dump never uses (a 52 MB manifest at k = 1024: 1.9 s indented, 0.2 s compact); the
    rest keeps the indentation. Deterministic: the same manifest gives the same bytes."""
    steps = [st for prog in (m.get("programs") or {}).values() if isinstance(prog, dict)
             for st in prog.get("steps") or () if isinstance(st, dict) and isinstance(st.get("pairs"), list)]
    saved = [st["pairs"] for st in steps]
    try:
        for i, st in enumerate(steps):
            st["pairs"] = f"{_PAIRS_TOKEN}{i}"
        text = json.dumps(m, indent=1, sort_keys=True, default=json_default)
    finally:
        for st, pr in zip(steps, saved):
            st["pairs"] = pr
    marks = re.findall(rf'"{_PAIRS_TOKEN}(\d+)"', text)
    if sorted(int(i) for i in marks) != list(range(len(steps))):   # the token met elsewhere: indent it all
        return json.dumps(m, indent=1, sort_keys=True, default=json_default) + "\n"
    return re.sub(rf'"{_PAIRS_TOKEN}(\d+)"',
                  lambda mt: json.dumps(saved[int(mt.group(1))], default=json_default), text) + "\n"


# ----------------------------------------------------------------------------- read
def read_manifest(path) -> dict:
    """Parse and check ``PLAN/manifest.json`` (format, version, required fields)."""
    if str(os.fspath(path)) == "":
        raise PlanError("the plan path is empty: give a plan directory")
    path = Path(path)
    mf = path / MANIFEST
    if not path.is_dir():
        raise PlanError(f"{path}: not a plan directory ({'a file' if path.exists() else 'no such directory'})")
    if not mf.is_file():
        kind = "a directory" if mf.is_dir() else "not a regular file" if mf.exists() else None
        raise PlanError(f"{mf}: the manifest is {kind}" if kind else
                        f"{mf}: missing manifest (not a plan, or an interrupted write)")
    fd, st = _open_plain(mf, "manifest")
    try:
        if st.st_size > _MAX_MANIFEST_BYTES:
            raise PlanError(f"{mf}: {st.st_size} bytes, more than a plan's manifest needs ({_MAX_MANIFEST_BYTES})")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(_MAX_MANIFEST_BYTES + 1)
    finally:
        os.close(fd)
    m = load_json(raw, str(mf))
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        got = m.get("format") if isinstance(m, dict) else type(m).__name__
        raise PlanError(f"{mf}: field 'format' must be {FORMAT!r}, got {printable(repr(got))[:80]}")
    v = m.get("format_version")
    if v not in SUPPORTED_VERSIONS:
        old = isinstance(v, int) and v < min(SUPPORTED_VERSIONS)
        raise PlanError(f"{mf}: field 'format_version' = {v!r} is not supported by this partplan "
                        f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})"
                        + (f"; a version-{v} plan has no exchange program: {REBUILD_HINT}" if old else ""))
    check_manifest(m, mf, parse_layout)  # one PlanError naming the field
    return m


def _check_file(path: Path, entry: dict, what: str, verify: bool) -> "_Mapped":
    """Open (never through a symbolic link) and map a file the manifest lists;
    its size must be the manifest's ``bytes`` and, with ``verify``, its sha256
    the manifest's ``sha256`` — checked on the very bytes that are then read.
    Returns the mapped file."""
    f = _Mapped(path, what)
    size, want = f.size, entry.get("bytes")
    if size != want:
        kind = "truncated" if size < want else "has extra bytes"
        raise PlanError(f"{path}: {what} {kind}: {size} bytes, manifest field 'bytes' says {want}")
    if verify:
        digest = f.sha256()
        if digest != entry.get("sha256"):
            raise PlanError(f"{path}: {what} is corrupted: sha256 {digest[:16]}… does not match manifest "
                            f"field 'sha256' {printable(entry.get('sha256'))[:16]}…")
    return f


def check_files(path, manifest: dict, *, verify: bool = False) -> None:
    """Every file the manifest lists (shards, partition file) is present with
    its recorded size; with ``verify`` also its sha256 (``partplan inspect``
    checks sizes only, ``validate`` checksums). One PlanError naming the file."""
    path = Path(path)
    _check_n(path, manifest)
    for rank, entry in enumerate(manifest["shards"]):
        _check_file(path / entry.get("file", shard_name(rank)), entry, f"shard of rank {rank}", verify)
    pf = manifest["partition_file"]
    _check_file(path / pf.get("file", PARTITION_FILE), pf, "partition file", verify)


def source_matches(manifest: dict, graph) -> bool:
    """True when ``graph`` is the input graph of the plan whose manifest is
    ``manifest``: its :attr:`~partplan.graph.Graph.matrix_fingerprint`
    (pattern and values) is the manifest's ``graph.source_fingerprint``.

    Unnormalized plans written before the values were hashed recorded the
    pattern there (``source_fingerprint == fingerprint``); for them the
    pattern decides, unless the plan is unweighted and ``graph`` carries
    values (another matrix)."""
    return source_fingerprints_match(manifest, graph.fingerprint, graph.matrix_fingerprint)


def source_fingerprints_match(manifest: dict, fingerprint: str, matrix_fingerprint: str) -> bool:
    """:func:`source_matches` from a graph's two fingerprints (a chunked graph's, streamed:
    :func:`partplan.io.chunked.chunked_fingerprint` and ``chunked_matrix_fingerprint``)."""
    mg = manifest.get("graph", {})
    want = mg.get("source_fingerprint") or mg.get("fingerprint")
    if want is None:
        return False
    if matrix_fingerprint == want:
        return True
    return (not manifest.get("normalize") and want == mg.get("fingerprint") == fingerprint
            and bool(mg.get("weighted", True)))


def _check_graph(m: dict, graph, where: Path):
    if graph is None:
        return
    from ..graph import check_graph
    check_graph(graph, error=PlanError)
    fp = m["graph"].get("fingerprint")
    if fp != graph.fingerprint and m.get("normalize") and source_matches(m, graph):
        raise PlanError(f"{where / MANIFEST}: the plan multiplies the {m['normalize']}-normalized matrix of graph "
                        f"{graph.name!r}, not the graph itself: pass "
                        f"partplan.nn.normalize_adjacency(graph, {m['normalize']!r})")
    if fp != graph.fingerprint:
        raise PlanError(f"{where / MANIFEST}: field 'graph.fingerprint' {str(fp)[:16]}… does not match the "
                        f"given graph {graph.name!r} ({graph.fingerprint[:16]}…; n={graph.n}, nnz={graph.nnz} vs "
                        f"plan n={m['graph'].get('n')}, nnz={m['graph'].get('nnz')}): the plan was built for "
                        f"another graph")


def _peek_fingerprint(f: Path) -> str | None:
    """The graph fingerprint in a shard's schema metadata, or None if unreadable."""
    try:
        mapped = _Mapped(f, "shard")   # a regular file, opened non-blocking without following a link
        raw = (ipc.open_file(mapped.buf).schema.metadata or {}).get(_META_KEY)
        fp = load_json(raw, str(f)).get("graph_fingerprint") if raw else None
        return fp if isinstance(fp, str) else None
    except Exception:  # any damage: fall back to the size/checksum message
        return None


def load_rank(path, rank: int, *, manifest: dict | None = None, verify: bool = True,
              check: bool = True) -> RankPlan:
    """Read only rank ``rank``'s shard (memory-mapped) after checking it against the manifest.

    verify : check the shard's sha256 (on the mapped bytes that are then read).
    check : run :func:`partplan.program.checks.shard_problems` (array types,
        ids inside [0, n), counts and buffer sizes bounded by the manifest's
        pairs and the shard's arrays, indices inside their buffers, CSR
        pointers) before anything indexes. A shard with problems comes back
        *quarantined* (``RankPlan.problems``; any array read through it raises
        the first problem as a PlanError naming the file and field): the
        executor then stops every rank of a job with that error through its
        collective start-up check, instead of this rank failing alone while
        its peers wait. :func:`load_plan` raises at once. Only ``validate``
        turns ``check`` off, to report the problems as its ``structure`` check."""
    path = Path(path)
    m = manifest or read_manifest(path)
    if not 0 <= rank < m["ranks"]:
        raise PlanError(f"{path}: rank {rank} out of range [0, {m['ranks']})")
    entry = m["shards"][rank]
    f = path / entry.get("file", shard_name(rank))
    _check_n(path, m)
    try:
        mapped = _check_file(f, entry, f"shard of rank {rank}", verify)
    except PlanError:
        other = None if os.path.islink(f) else _peek_fingerprint(f)
        if other is not None and other != m["graph"]["fingerprint"]:
            raise PlanError(f"{f}: shard was built for graph {other[:16]}… but {path / MANIFEST} field "
                            f"'graph.fingerprint' says {m['graph']['fingerprint'][:16]}… (manifest and shards "
                            f"come from different plans)") from None
        raise
    meta, arrays = _parse_arrow(f, mapped.buf)
    if meta.get("rank") != rank:
        raise PlanError(f"{f}: shard metadata field 'rank' = {meta.get('rank')!r}, expected {rank}")
    if meta.get("graph_fingerprint") != m["graph"]["fingerprint"]:
        raise PlanError(f"{f}: shard metadata field 'graph_fingerprint' differs from the manifest's "
                        f"(shard from another plan)")
    if "normalize" in meta and meta["normalize"] != m.get("normalize"):
        # the values are Â's of the shard's normalization: a manifest saying another one would train,
        # and report, a matrix the plan does not hold (same pattern, same fingerprint)
        held = ("the input matrix's values" if meta["normalize"] is None else
                f"{printable(repr(meta['normalize']))[:40]}-normalized values")
        raise PlanError(f"{path / MANIFEST}: field 'normalize' = {printable(repr(m.get('normalize')))[:40]} but "
                        f"the shard of rank {rank} holds {held} (the manifest was edited, or belongs to another "
                        f"plan)")
    expected = set()
    for pr in m["programs"].values():
        if "same_as" in pr:
            continue
        expected |= {f"{pr['prefix']}.in_ids", f"{pr['prefix']}.out_ids"}
        for st in pr["steps"]:
            expected |= {f"{st['id']}.{a}" for a in st["arrays"]}
    for name in arrays:
        if name not in expected:
            raise PlanError(f"{f}: field {name!r} belongs to no step of the manifest's programs "
                            f"(shard from another plan?)")
    for name in sorted(expected):
        if name not in arrays:
            raise PlanError(f"{f}: field {name!r} (named by the manifest's programs) is missing")
    progs = meta.get("programs")
    if not isinstance(progs, dict) or any(
            not isinstance(progs.get(p_), dict) or not isinstance(progs[p_].get("buffers"), dict)
            for p_ in m["programs"]):
        raise PlanError(f"{f}: shard metadata field 'programs' lacks the buffer sizes of "
                        f"{', '.join(m['programs'])}")
    for p_, pm in progs.items():
        for b_, rows in pm["buffers"].items():
            if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
                raise PlanError(f"{f}: shard metadata field 'programs.{p_}.buffers.{printable(b_)}' = "
                                f"{printable(repr(rows))[:40]} is not a row count")
    rp = RankPlan(rank, meta, arrays)
    if check:  # what validate's structure check asks, before anything indexes or allocates
        rp.problems = [f"{f}: {x}" for x in shard_problems(m, rp, pairs=False, layout=layout_from_manifest(m))]
    return rp


def plan_rows(path, manifest: dict | None = None) -> int:
    """The plan's ``graph.n`` once it is checked against its partition file
    (what a job sizes its buffers by, before it reads any shard); ``manifest``:
    the plan's, when the caller has read it already."""
    path = Path(path)
    m = read_manifest(path) if manifest is None else manifest
    _check_n(path, m)
    return int(m["graph"]["n"])


def _check_n(path: Path, m: dict) -> None:
    """``graph.n`` is bounded by the partition file (int64 ``part`` of length
    n): a manifest claiming more rows than that file can hold is refused
    before anything is sized by n (a stat, not a read)."""
    pf = m["partition_file"]
    f = path / pf.get("file", PARTITION_FILE)
    n = int(m["graph"]["n"])
    if 8 * n > pf["bytes"]:
        raise PlanError(f"{path / MANIFEST}: field 'graph.n' = {n} but the partition file holds at most "
                        f"{pf['bytes'] // 8} rows (field 'partition_file.bytes' = {pf['bytes']})")
    try:
        st = os.lstat(f)
    except OSError:
        return  # a rank alone does not need partition.arrow; load_plan reports it missing
    if not stat.S_ISREG(st.st_mode):
        return
    if st.st_size != pf["bytes"]:
        raise PlanError(f"{f}: partition file is {st.st_size} bytes, manifest field 'partition_file.bytes' "
                        f"says {pf['bytes']}")
    rows = _file_rows(f)
    if rows is not None and rows != n:
        raise PlanError(f"{path / MANIFEST}: field 'graph.n' = {n} but the partition file {f.name} holds {rows} rows "
                        f"(one per row of the graph: the manifest was edited, or belongs to another plan)")


def _file_rows(f: Path) -> int | None:
    """The rows of the graph a plan's partition file holds, as its one record batch declares them
    (:func:`partplan.io.arrowcheck.ipc_batches`: the footer and message header, a few hundred
    bytes, no array read): one row whose every column is a list of n values (:func:`_table`), so
    every list's values node has length n. None when the file cannot be opened, its structure is
    malformed or not that shape (its full reader names the problem)."""
    try:
        with open(f, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            batches = ipc_batches(mm)
    except (OSError, ValueError, IpcProblem):
        return None
    if len(batches) != 1 or batches[0].rows != 1 or len(batches[0].node_lengths) % 2:
        return None
    values = set(batches[0].node_lengths[1::2])
    return values.pop() if len(values) == 1 else None


def load_plan(path, rank: int | None = None, graph=None, *, verify: bool = True, check: bool = True):
    """Load a plan directory.

    rank : None → the whole :class:`Plan` (every shard + partition.arrow);
        an int → only that rank's :class:`RankPlan` (reads manifest + one shard).
    graph : if given, its fingerprint must match the plan's (else PlanError).
    verify : check each file's sha256 (reads it once); sizes are always checked.
    check : each shard's structure checked before it is returned (see
        :func:`load_rank`); a shard that could make a reader index out of
        bounds or allocate beyond what its file holds is a PlanError.

    Raises :class:`PlanError` naming the file and field on a missing or
    corrupted shard, truncation, unknown format version or another graph.
    """
    from .._args import check_bool, check_int, check_path
    path = Path(check_path("path", path, error=PlanError))
    verify, check = check_bool("verify", verify, error=PlanError), check_bool("check", check, error=PlanError)
    m = read_manifest(path)
    _check_graph(m, graph, path)
    if rank is not None:
        rank = check_int("rank", rank, hi=int(m["ranks"]) - 1, error=PlanError)
        rp = load_rank(path, rank, manifest=m, verify=verify, check=check)
        rp.check()
        return rp
    ranks = [load_rank(path, r, manifest=m, verify=verify, check=check) for r in range(m["ranks"])]
    for rp in ranks:
        rp.check()
    g = _partition_arrays(path, m, verify)
    if check:       # unchecked shards (validate's own load) may lack what this reads: validate reports it
        _check_rows_of_parts(path, m, ranks, g["part"])
    return Plan(m, ranks, g["part"], g.get("owner"), g.get("perm"))


def _check_rows_of_parts(path: Path, m: dict, ranks: list, part: np.ndarray) -> None:
    """In a plan whose ranks are its parts (1D and routed layouts), rank r's output rows are
    exactly the rows the partition file puts in part r: a partition file changed beside its
    shards (and re-signed) is refused here, before an export writes it. O(n)."""
    if not layout_from_manifest(m).rank_rows_are_part or part.size == 0:
        return
    part = np.asarray(part, dtype=np.int64)
    sizes = np.bincount(part, minlength=len(ranks))
    for rp in ranks:
        out = np.asarray(rp.out_ids(), dtype=np.int64)
        if out.size != sizes[rp.rank] or not bool(np.all(part[out] == rp.rank)):
            raise PlanError(f"{path}: the partition file puts {int(sizes[rp.rank])} rows in part {rp.rank}, but "
                            f"rank {rp.rank}'s shard outputs {out.size} rows, not all of them (the partition "
                            f"file and the shards are of different plans)")


def _is_block_order(perm: np.ndarray, assign: np.ndarray) -> bool:
    """``perm`` (old -> new id) is the block order of ``assign`` (values checked in range): compiled,
    with one counter per block (every rank of a loader checks it: no n-sized temporaries)."""
    from .._kernels import HAVE_NUMBA, block_order_mismatch
    from ..program.exchange import perm_by

    if assign.dtype not in (np.int32, np.int64) or not assign.dtype.isnative:
        assign = assign.astype(np.int64)
    if not perm.dtype.isnative:
        perm = perm.astype(perm.dtype.newbyteorder("="))
    k = int(assign.max()) + 1
    if not HAVE_NUMBA:
        return bool(np.array_equal(perm, perm_by(assign.astype(np.int64, copy=False), k)))
    start = np.zeros(k, np.int64)
    np.cumsum(np.bincount(assign, minlength=k)[:-1], out=start[1:])
    return block_order_mismatch(perm, assign, start) < 0


def _partition_arrays(path: Path, m: dict, verify: bool) -> dict[str, np.ndarray]:
    """The arrays of a plan's partition file (``part``, optional ``owner`` and ``perm``), its size
    (and sha256 when ``verify``) checked against the manifest, every array n integers in range."""
    pf = path / m["partition_file"].get("file", PARTITION_FILE)
    meta, g = _parse_arrow(pf, _check_file(pf, m["partition_file"], "partition file", verify).buf, "partition file")
    n, k = m["graph"]["n"], m["k"]
    for key, want in (("graph_fingerprint", m["graph"].get("fingerprint")), ("k", k)):
        if meta.get(key) != want:   # the file's own record of the plan it belongs to
            raise PlanError(f"{pf}: metadata field {key!r} = {str(meta.get(key))[:40]!r}, the manifest's is "
                            f"{str(want)[:40]!r}: the partition file of another plan")
    for key in ("part", "owner", "perm"):
        a = g.get(key)
        if a is None:
            if key == "part":
                raise PlanError(f"{pf}: field 'part' is missing")
            continue
        lim = n if key == "perm" else k
        if a.dtype.kind not in "iu" or a.size != n or (a.size and (int(a.min()) < 0 or int(a.max()) >= lim)):
            raise PlanError(f"{pf}: field {key!r} is not {n} integers in [0, {lim})")
    if g.get("perm") is not None and n:   # old -> new id, determined by the blocks (plan-format.md)
        assign = g["part"] if g.get("owner") is None else g["owner"]
        if not _is_block_order(g["perm"], assign):
            raise PlanError(f"{pf}: field 'perm' is not the block order of its part / owner arrays (block 0's "
                            f"rows first, ascending old id, then block 1, ...)")
    return g


def load_plan_partition(path, graph=None, *, verify: bool = True) -> tuple[dict, np.ndarray, np.ndarray | None]:
    """The partition a plan was built from, without its shards: (manifest, part int64[n] (row block
    of every vertex, original vertex order), owner int64[n] or None). The manifest and the
    partition file get the checks of :func:`load_plan`; with ``graph``, it must be the plan's graph
    or the graph the plan was built from (:func:`source_matches`: a normalized plan's partition is
    a partition of its input graph's rows too). Raises :class:`PlanError` naming the file and field."""
    path = Path(path)
    m = read_manifest(path)
    if graph is not None and not (m["graph"].get("fingerprint") == graph.fingerprint or source_matches(m, graph)):
        _check_graph(m, graph, path)      # another graph: the error that says which
    g = _partition_arrays(path, m, verify)
    owner = g.get("owner")
    return m, g["part"].astype(np.int64, copy=False), None if owner is None else owner.astype(np.int64, copy=False)
