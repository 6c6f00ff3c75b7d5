"""The registry of real graphs (``datasets/registry.json``) and where files live.

Each registry entry records where a real graph comes from (a Debian binary
package or a PyPI source distribution, with version and sha256), the path of
the file inside that artifact, the file's sha256, its format, license,
citation, and the expected vertex / edge counts (``n``, ``m``: undirected
edges after symmetrizing, without self loops or duplicates; for hypergraphs
``m`` is the number of nets and ``pins`` the number of pins).

Locations
---------
* The ``datasets/`` directory (registry + embedded files) is looked up in
  this order: ``$PARTPLAN_DATASETS_DIR``; ``partplan/datasets/data/`` (where a
  wheel puts ``datasets/`` when pyproject maps it as package data
  ``partplan.datasets.data``); the ``datasets/`` folder next to the
  ``partplan`` package (a source checkout or an editable install).
* Downloaded files go to the cache: the ``cache_dir`` argument, else
  ``$PARTPLAN_DATA``, else ``$XDG_CACHE_HOME/partplan``, else
  ``~/.cache/partplan``. Layout: ``<cache>/artifacts/<artifact file>`` and
  ``<cache>/<dataset name>/<file name>``.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

from ..errors import DatasetError

#: bytes of the dataset registry (the packaged one is tens of KiB)
REGISTRY_MAX_BYTES = 64 << 20

__all__ = ["datasets_dir", "cache_dir", "registry", "entry", "names", "embedded",
           "embedded_path", "cached_path", "sha256_file", "REQUIRED_FIELDS", "SOURCE_FIELDS"]

#: fields every registry entry carries (tests check them all)
REQUIRED_FIELDS = ("name", "kind", "domain", "n", "m", "pins", "source", "path", "format",
                   "file_sha256", "file_size", "license", "citation", "notes", "embedded")
#: fields of ``entry["source"]``
SOURCE_FIELDS = ("type", "package", "version", "architecture", "distribution", "artifact",
                 "artifact_sha256", "artifact_size", "url")
SOURCE_TYPES = ("debian-binary", "pypi-sdist")
KINDS = ("graph", "hypergraph")


def datasets_dir() -> Path:
    """The directory holding ``registry.json`` and the embedded graphs."""
    env = os.environ.get("PARTPLAN_DATASETS_DIR")
    if env:
        p = Path(env).expanduser()
        if not (p / "registry.json").is_file():
            raise DatasetError(f"PARTPLAN_DATASETS_DIR={env} has no registry.json")
        return p
    packaged = Path(__file__).resolve().parent / "data"   # a wheel that ships datasets/ as package data
    if (packaged / "registry.json").is_file():
        return packaged
    p = Path(__file__).resolve().parents[2] / "datasets"   # a source checkout: <repo>/datasets
    if (p / "registry.json").is_file():
        return p
    raise DatasetError("the dataset registry (datasets/registry.json) was not found next to the "
                       "partplan package; set PARTPLAN_DATASETS_DIR to a partplan checkout's datasets/ folder")


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The download cache: ``path``, ``$PARTPLAN_DATA``, ``$XDG_CACHE_HOME/partplan``
    or ``~/.cache/partplan`` (not created here)."""
    if path is not None:
        if str(os.fspath(path)).strip() == "":
            raise DatasetError("the dataset cache directory (--cache) is empty: give a directory")
        return _a_dir(Path(path).expanduser(), "--cache")
    env = os.environ.get("PARTPLAN_DATA")
    if env:
        return _a_dir(Path(env).expanduser(), "PARTPLAN_DATA")
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "partplan"


def _a_dir(path: Path, given: str) -> Path:
    """``path`` unless it exists and is no directory (one DatasetError naming it and ``given``)."""
    if path.exists() and not path.is_dir():
        raise DatasetError(f"{path}: the dataset cache ({given}) is not a directory")
    return path


@lru_cache(maxsize=4)
def _load_registry(path: str, mtime_ns: int, size: int) -> dict:
    from ..io.jsonfile import read_json
    reg = read_json(path, max_bytes=REGISTRY_MAX_BYTES, what="dataset registry", error=DatasetError)
    if not isinstance(reg, dict) or not isinstance(reg.get("datasets"), list):
        raise DatasetError(f"{path}: registry has no 'datasets' list")
    for i, e in enumerate(reg["datasets"]):
        missing = [f for f in REQUIRED_FIELDS if not isinstance(e, dict) or f not in e]
        if missing:
            raise DatasetError(f"{path}: entry {i} lacks field(s) {', '.join(missing)}")
        _check_entry(path, i, e)
    return reg


_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~%-]*\Z")   # '%': Debian's epochs (pkg_1%3a2.0-1_all.deb)


def _check_entry(path: str, i: int, e: dict) -> None:
    """The fields of registry entry ``i`` that name files or size work, by type and form: the
    dataset's name, its artifact's name and the file name of its ``path`` become names in the
    cache (plain names: never a path of their own, never "." or ".."); counts are integers >= 0;
    digests are 64 hex digits. One DatasetError naming the field."""
    def bad(field: str, what: str):
        raise DatasetError(f"{path}: entry {i} field {field!r} {what}")

    def plain(field: str, v) -> None:
        if not isinstance(v, str) or not _PLAIN_NAME.match(v) or v in (".", ".."):
            bad(field, f"= {str(v)[:60]!r} is not a plain file name (letters, digits, . _ + ~ % -)")

    def count(field: str, v, none_ok: bool = False) -> None:
        if (v is None and none_ok) or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            return
        bad(field, f"= {str(v)[:40]!r} is not an integer >= 0")

    def digest(field: str, v) -> None:
        if not isinstance(v, str) or not re.fullmatch(r"[0-9a-f]{64}", v):
            bad(field, "is not a sha256 (64 lower-case hex digits)")

    plain("name", e["name"])
    if e["kind"] not in KINDS:
        bad("kind", f"= {str(e['kind'])[:40]!r} is not one of {', '.join(KINDS)}")
    count("n", e["n"])
    count("m", e["m"])
    count("pins", e["pins"], none_ok=True)
    count("file_size", e["file_size"])
    digest("file_sha256", e["file_sha256"])
    for field in ("path", "format", "license"):
        if not isinstance(e[field], str):
            bad(field, "is not a string")
    plain("path (its file name)", Path(e["path"]).name)
    src = e["source"]
    if not isinstance(src, dict):
        bad("source", "is not an object")
    missing = [f for f in SOURCE_FIELDS if f not in src]
    if missing:
        bad("source", f"lacks field(s) {', '.join(missing)}")
    if src["type"] not in SOURCE_TYPES:
        bad("source.type", f"= {str(src['type'])[:40]!r} is not one of {', '.join(SOURCE_TYPES)}")
    plain("source.artifact", src["artifact"])
    count("source.artifact_size", src["artifact_size"])
    digest("source.artifact_sha256", src["artifact_sha256"])
    for field in ("package", "version", "url"):
        if not isinstance(src[field], str):
            bad(f"source.{field}", "is not a string")


def registry() -> dict:
    """The parsed registry (a deep copy: callers may modify it)."""
    p = datasets_dir() / "registry.json"
    st = p.stat()
    return copy.deepcopy(_load_registry(str(p), st.st_mtime_ns, st.st_size))


def names() -> list[str]:
    """Names of every registered real dataset, in registry order."""
    return [e["name"] for e in registry()["datasets"]]


def entry(name: str) -> dict:
    """The registry entry of ``name`` (case-insensitive); unknown names raise
    :class:`DatasetError` listing the choices."""
    entries = registry()["datasets"]
    for e in entries:
        if e["name"] == name:
            return e
    folded = [e for e in entries if e["name"].lower() == str(name).lower()]
    if len(folded) == 1:
        return folded[0]
    known = [e["name"] for e in entries]
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    raise DatasetError(f"unknown dataset {name!r}{hint}; choices: {', '.join(known)}")


def embedded() -> list[str]:
    """Names of the datasets shipped inside ``datasets/`` (no download needed)."""
    return [e["name"] for e in registry()["datasets"] if e.get("embedded")]


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def embedded_path(name: str, *, verify: bool = True) -> Path | None:
    """Path of the embedded copy of ``name`` (None if it has none). With
    ``verify`` the file's sha256 is checked against the registry (a
    :class:`DatasetError` on mismatch, e.g. a Git LFS pointer or a corrupt
    checkout)."""
    e = entry(name)
    emb = e.get("embedded")
    if not emb:
        return None
    p = datasets_dir() / emb["file"]
    if not p.is_file():
        raise DatasetError(f"embedded dataset file {p} is missing (the registry lists it)")
    if verify:
        got = sha256_file(p)
        if got != emb["sha256"]:
            raise DatasetError(f"{p}: sha256 {got} does not match the registry ({emb['sha256']}); "
                               "the embedded file is corrupt or not the recorded version")
    return p


def cached_path(name: str, cache: str | os.PathLike | None = None, *, verify: bool = True) -> Path | None:
    """Path of the fetched file of ``name`` in the cache, or None if absent.
    With ``verify``, a file whose size or sha256 differs from the registry is
    treated as absent (it will be fetched again)."""
    e = entry(name)
    p = cache_dir(cache) / e["name"] / Path(e["path"]).name
    if not p.is_file():
        return None
    if verify and (p.stat().st_size != e["file_size"] or sha256_file(p) != e["file_sha256"]):
        return None
    return p
