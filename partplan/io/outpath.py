"""Output paths checked before any work, so a long run never ends in an error
about where its result should go.

:func:`check_output_file` and :func:`check_output_dir` raise one
:class:`~partplan.errors.OutputPathError` naming the path when the folder is
missing, is not a folder or cannot be written (probed by creating and removing
a temporary file there, which also catches read-only file systems and works
for root), when the name is a folder where a file is expected (or a file or a
non-empty folder where a new folder is expected), when its suffix names no
format the command writes (``.npy``/``.npz`` arrays, ``.pt`` weights, ``.png``;
graphs in a format partplan only reads, such as ``.pt``), or when it is a file of
another kind that the command reads (``inputs``). They create nothing and write
nothing else.

The suffix rules of each output kind live here (one source): graph files
(:func:`partplan.io.detect_format`), partitions (:data:`PARTITION_SUFFIXES`,
METIS-style ``NAME.part.K``), plans (``.plan``), PNG plots, ``.npy`` arrays.

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> check_output_file(d / "g.part.16", kind="partition").name
'g.part.16'
>>> check_output_file(d / "missing" / "g.npy", kind="partition")
Traceback (most recent call last):
...
partplan.errors.OutputPathError: ...missing/g.npy: directory ...missing does not exist
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from ..errors import GraphFormatError, OutputPathError

# partition files: binary / table formats, text (METIS one id per line), and .plan
PARTITION_SUFFIXES = (".npy", ".parquet", ".arrow", ".feather", ".csv", ".part", ".txt", ".plan")
_METIS_PART = re.compile(r"\.part\.\d+$")   # METIS's own name: graph.part.16
KINDS = ("graph", "partition", "plan", "png", "npy", "npz", "pt", "any")


def _suffix_problem(p: Path, kind: str) -> str | None:
    name = p.name.lower()
    if kind == "any":
        return None
    if kind == "graph":
        from . import WRITE_FORMATS, detect_format
        try:
            fmt = detect_format(p)
        except GraphFormatError as exc:     # an output: its format is named with --to, not --from
            return exc.problem.replace("read_graph(path, format=...), partplan convert --from FMT",
                                       "write_graph(graph, path, format=...), partplan convert --to FMT")
        if fmt not in WRITE_FORMATS + ("hgr",):   # .hgr: convert writes a hypergraph model there
            return f"partplan reads .{fmt} graphs but does not write them; use .npz, .mtx, .graph, .parquet, ..."
        return None
    if kind == "partition":
        gz = name.endswith(".gz")
        base = name[:-3] if gz else name
        ext = os.path.splitext(base)[1]
        if _METIS_PART.search(base) or (ext in (".part", ".txt")) or (ext in PARTITION_SUFFIXES and not gz):
            return None
        if gz and ext in PARTITION_SUFFIXES:
            return f"only text partitions (.part, .txt, NAME.part.K) may be compressed, not {ext}.gz"
        return (f"unknown partition file suffix {ext or '(none)'}; use "
                f"{', '.join(PARTITION_SUFFIXES)} or METIS's NAME.part.K (text may end in .gz)")
    want = {"plan": ".plan", "png": ".png", "npy": ".npy", "npz": ".npz", "pt": ".pt"}[kind]
    if not name.endswith(want) or name == want:
        return f"the output must be a NAME{want} {'directory' if kind == 'plan' else 'file'}"
    return None


def check_not_an_input(path: Path, inputs) -> None:
    """One OutputPathError when the output ``path`` is one of the existing files ``inputs`` reads,
    or lies inside an input folder (a chunked graph's chunk, a plan's shard, or a new name there:
    the folder would no longer be the input it was)."""
    real = os.path.realpath(path)
    for inp in inputs:
        if inp is None or not isinstance(inp, (str, os.PathLike)) or not os.path.exists(inp):
            continue
        try:
            same = path.exists() and os.path.samefile(path, inp)
        except OSError:
            continue
        if same:
            raise OutputPathError(f"{path}: is the input {inp}; writing the output there would replace it "
                                  f"(name another output)")
        if os.path.isdir(inp):
            folder = os.path.realpath(inp)
            if os.path.commonpath([folder, real]) == folder:
                raise OutputPathError(f"{path}: is inside the input {inp}; writing the output there would "
                                      f"change it (name another output)")


def _check_folder(p: Path, parent: Path) -> None:
    if not parent.exists():
        raise OutputPathError(f"{p}: directory {parent} does not exist")
    if not parent.is_dir():
        raise OutputPathError(f"{p}: {parent} is not a directory")
    try:  # the real test: create a file there (permissions, read-only mounts, quotas of 0)
        fd, probe = tempfile.mkstemp(prefix=".partplan-probe-", dir=parent)
    except OSError as exc:
        raise OutputPathError(f"{p}: directory {parent} is not writable ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_suffix(path: str | os.PathLike, kind: str) -> Path:
    """The suffix rule of an output ``kind`` alone (no folder checks), as :func:`check_output_file` and
    :func:`check_output_dir` apply it; for a writer that creates the missing folders above its output
    and must refuse a bad name before creating any.

    >>> check_output_suffix("missing/g.xyz", "partition")
    Traceback (most recent call last):
    ...
    partplan.errors.OutputPathError: missing/g.xyz: unknown partition file suffix...
    """
    p = Path(path)
    bad = _suffix_problem(p, kind)
    if bad:
        raise OutputPathError(f"{p}: {bad}")
    return p


def _parent(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def check_output_file(path: str | os.PathLike, *, kind: str = "any", inputs=()) -> Path:
    """Check that a file can be written at ``path`` (see the module doc).

    kind : "graph" | "partition" | "plan" (``partplan partition -o X.plan``
        writes a plan directory; checked as :func:`check_output_dir`) | "png"
        | "npy" | "npz" | "pt" | "any" (no suffix rule). Returns ``Path(path)``.
    inputs : files of another kind the command reads (None entries skipped): the output may not be
        one of them (the same file by any name: a link, ``./g.txt``) — a partition written over the
        graph it partitions would replace it. (An output of the input's own kind may replace it:
        every writer is atomic, so ``run spmm --feature-file H.npy --output H.npy`` iterates.)
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if str(path) == "":
        raise OutputPathError("the output path is empty")
    p = Path(path)
    check_not_an_input(p, inputs)
    plan_dir = kind == "partition" and p.name.lower().endswith(".plan")
    if str(path).endswith(("/", os.sep)) and not plan_dir:      # Path() drops the slash: x.npy/ -> x.npy
        raise OutputPathError(f"{path}: names a directory (it ends in {os.sep}); expected a file name")
    if p.is_dir() and not plan_dir:
        raise OutputPathError(f"{p}: is a directory; expected a file name")
    if p.exists() and not p.is_dir() and not p.is_file():     # a FIFO, a socket, a device
        raise OutputPathError(f"{p}: is not a regular file (a pipe, socket or device); the output replaces "
                              f"a file by renaming onto it: name a file")
    check_output_suffix(p, kind)
    if plan_dir:
        return check_output_dir(p, kind="plan")
    if p.is_dir():
        raise OutputPathError(f"{p}: is a directory; expected a file name")
    if kind == "partition" and p.suffix.lower() != ".parquet":
        # the files written beside the part array (its JSON sidecar, a decoupled owner array): each
        # replaces its name only after all are written, so one that cannot be must fail here
        for companion in (p.with_name(p.name + ".json"), p.with_name(p.name + ".owner.npy")):
            check_not_an_input(companion, inputs)
            if companion.is_dir():
                raise OutputPathError(f"{companion}: is a directory; {p} is written with this file beside it "
                                      f"(remove it or name another output)")
    _check_folder(p, _parent(p))
    return p


def check_output_dir(path: str | os.PathLike, *, kind: str = "any", replace_if=None, inputs=()) -> Path:
    """Check that a new folder can be written at ``path``: it does not exist,
    or is empty, or (``replace_if``, a callable on the path, e.g. "holds a
    plan manifest") may be replaced; it is none of ``inputs`` and not inside an input folder
    (:func:`check_not_an_input`). ``kind="plan"`` requires ``NAME.plan``
    and replaces an existing plan. Returns ``Path(path)``."""
    if str(path) == "":
        raise OutputPathError("the output path is empty")
    p = Path(path)
    check_not_an_input(p, inputs)
    if kind == "plan":
        check_output_suffix(p, "plan")
        replace_if = replace_if or (lambda q: (q / "manifest.json").is_file())
    if p.exists():
        if p.is_file():
            raise OutputPathError(f"{p}: is a file; expected a new or empty directory")
        if any(p.iterdir()) and not (replace_if and replace_if(p)):
            raise OutputPathError(f"{p}: exists and is not empty"
                                  + ("" if kind != "plan" else " nor a plan directory")
                                  + "; refusing to overwrite it")
    _check_folder(p, _parent(p))
    return p


def check_output_folder(path: str | os.PathLike) -> Path:
    """Check a folder a command writes files into (``demo --out``, ``bench
    --out``): an existing writable folder, or a missing one whose nearest
    existing ancestor is a writable folder (it is created with its parents
    later). Returns ``Path(path)``."""
    if str(path) == "":
        raise OutputPathError("the output path is empty")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputPathError(f"{p}: is not a directory")
    q = p
    while not q.exists() and q != _parent(q):
        q = _parent(q)
    if not q.is_dir():
        raise OutputPathError(f"{p}: {q} is not a directory")
    _check_folder(p, q)
    return p


__all__ = ["KINDS", "PARTITION_SUFFIXES", "check_output_dir", "check_output_file", "check_output_folder"]
