"""Pieces every command shares: loading GRAPH arguments, argparse types that
reject bad numbers with one clear line (defined with the job options in
:mod:`partplan.jobs.args`), and the subcommands of the registered jobs."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from partplan.errors import GraphFormatError
from partplan.jobs.args import fraction, nonneg_float, nonneg_int, positive_int

__all__ = ["load_graph", "add_weight_option", "fraction", "nonneg_float", "nonneg_int", "positive_int", "add_job_commands",
           "run_job_cmd"]


def check_feature_width(f: int, option: str = "-f") -> int:
    """A feature width ``f`` in [1, MAX_F] — the range every plan reader
    accepts (:data:`partplan.program.checks.MAX_F`), so no command writes a
    plan its readers refuse. One OptionError naming the option, before any
    work."""
    from partplan.errors import OptionError
    from partplan.program.checks import MAX_F
    if not 1 <= int(f) <= MAX_F:
        raise OptionError(f"{option}: a feature width of {f}; plans are costed for f in [1, {MAX_F}] (2^24)")
    return int(f)


def add_weight_option(p: argparse.ArgumentParser) -> None:
    """``--weight FIELD``: the field of a ``.pt`` PyG Data read as edge weights
    (weights only when named, as :func:`partplan.plan_from_pyg` reads a Data)."""
    p.add_argument("--weight", metavar="FIELD", default=None,
                   help="a .pt graph (PyG Data): the field read as edge weights, one per edge (e.g. edge_weight, "
                        "edge_attr); default: none, every edge weighs 1 and edge_attr of any width is left alone, "
                        "as partplan.plan_from_pyg reads a Data")


def load_graph(spec: str, *, fetch: bool = False, symmetrize: bool = False, weight: str | None = None,
               normalize: str | None = None):
    """A graph file (any format :func:`partplan.io.read_graph` reads) or a
    registered dataset name (:func:`partplan.datasets.load_graph`; with
    ``fetch`` a missing download is fetched first). ``symmetrize`` adds Aᵀ.

    A ``.pt`` PyG Data is read as :func:`partplan.plan_from_pyg` reads it
    (:func:`partplan.interop.pyg.plan_graph`): edge weights only from the field
    ``weight`` names (``--weight``), and with ``normalize`` ("gcn", "mean") PyG's
    remaining-self-loops rule, so the CLI and the Python API build the same
    matrix (same ``source_fingerprint``). ``weight`` on any other graph is an
    OptionError."""
    from partplan import datasets
    from partplan.errors import OptionError
    from partplan.io import read_graph

    normalize = None if normalize in (None, "none") else normalize
    if str(spec).strip() == "":       # Path("") is the current directory
        raise OptionError("the graph path is empty: give a graph file, a chunked graph directory or a dataset name")
    path = Path(spec)
    if path.exists():
        from partplan.io.chunked import is_chunked
        if path.is_dir() and not is_chunked(path):
            raise GraphFormatError("is a directory, not a graph file (nor a chunked graph: no header.json)", path)
        if not path.is_dir():
            from partplan.io import detect_format
            fmt = detect_format(path)
            if fmt == "pt":
                return _load_pt(path, symmetrize=symmetrize, weight=weight, normalize=normalize)
        if weight is not None:
            raise weight_not_pt(weight, spec)
        return read_graph(path, symmetrize=symmetrize)
    if spec.lower() not in {name.lower() for name in datasets.names()}:   # names case-insensitive, as `datasets` takes them
        raise GraphFormatError("no such file, and not a registered dataset name "
                               "(see `partplan datasets list`)", spec)
    if weight is not None:
        raise OptionError(f"--weight {weight}: names a field of a .pt PyG Data, not of the dataset {spec}")
    g = datasets.load_graph(spec, fetch=fetch)  # DatasetError says how to fetch it
    return g.normalize(symmetrize=True) if symmetrize and not g.is_symmetric() else g


def require_subcommand(p: argparse.ArgumentParser, sub, what: str) -> None:
    """A command given without its subcommand is a usage error (exit 2) that lists the choices."""
    p.set_defaults(func=lambda args: p.error(f"{what} is required: one of {', '.join(sub.choices)}"))


def weight_not_pt(weight: str, spec) -> Exception:
    """The error of ``--weight`` on a graph that is no ``.pt`` PyG Data."""
    from partplan.errors import OptionError
    return OptionError(f"--weight {weight}: names a field of a .pt PyG Data; {spec} is not a .pt graph "
                       f"(its own format says whether it is weighted)")


def add_job_commands(sub, command: str) -> None:
    """One subcommand per registered job under ``command`` ("run", "train"):
    its help, description and examples, the shared job options, the job's own
    arguments and ``--json`` (:mod:`partplan.jobs` is the one list)."""
    from partplan.jobs import jobs
    from partplan.jobs.args import add_job_options
    for job in jobs(command):
        s = sub.add_parser(job.subcommand, help=job.help, description=job.description or job.help,
                           epilog=("examples:\n" + job.examples) if job.examples else None,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        add_job_options(s)
        job.add_arguments(s)
        s.add_argument("--json", action="store_true", help="print the report as JSON")
        s.set_defaults(func=run_job_cmd, job_name=job.name)


def run_job_cmd(args) -> int:
    """Run the registered job ``args.job_name``: check ``--output`` (the job's
    output kind), configure (checks), execute,
    print the report (``--json`` or the job's text); exit 1 when the job's
    report says the run went wrong (the line goes to stderr)."""
    from partplan.jobs import execute, get
    job = get(args.job_name)
    if getattr(args, "quiet", False) and hasattr(args, "progress"):
        args.progress = False  # -q wins over --progress
    if job.output and getattr(args, "output", None) is not None:  # the output first, before anything is read
        from partplan.io.outpath import check_output_file
        args.output = str(check_output_file(args.output, kind=job.output))
    cfg = job.configure(args)
    if not getattr(args, "quiet", False):  # the launcher says "starting N processes" once the checks passed
        cfg["announce"] = f"[{job.command} {job.subcommand}]"
    rep = execute(job, cfg, nprocs=args.nprocs, threads=args.threads)
    if rep is None:  # a non-zero rank under torchrun
        return 0
    print(json.dumps(rep, indent=1) if args.json else job.render(rep))
    problem = job.problem(rep)
    if problem:  # a failure: shown under -q too
        print(problem, file=getattr(sys.stderr, "real", sys.stderr))
        return 1
    return 0


def _load_pt(path: Path, *, symmetrize: bool, weight: str | None, normalize: str | None):
    """A ``.pt`` graph as the CLI reads it (:func:`load_pt_graph`'s graph)."""
    return load_pt_graph(path, symmetrize=symmetrize, weight=weight, normalize=normalize)[0]


def load_pt_graph(path: Path, *, symmetrize: bool = False, weight: str | None = None,
                  normalize: str | None = None):
    """(graph, the loaded object) of a ``.pt`` file, from one read: a PyG Data through
    :func:`partplan.interop.pyg.plan_graph` (weights only when named), a bare edge_index tensor
    through :func:`partplan.io.read_pt`. The object serves what else a command takes from the same
    file (``partition --balance memory``'s bytes per vertex)."""
    from partplan.io.pt import load_pt, read_pt
    normalize = None if normalize in (None, "none") else normalize
    obj = load_pt(path)
    if not hasattr(obj, "edge_index"):
        return read_pt(path, symmetrize=symmetrize, weight=weight), obj
    from partplan.interop.pyg import plan_graph
    g = plan_graph(obj, normalize=normalize, weight=weight, name=path.name.rsplit(".", 1)[0], source=path)
    return (g.normalize(symmetrize=True) if symmetrize else g), obj


def check_chunk_dir_name(out: Path, error) -> None:
    """A chunked graph's directory named like a graph file (``g.mtx``, ``g.graph``) is refused with
    ``error``: every later command would read the name as a file of that format."""
    from pathlib import Path

    from partplan.io import EXTENSIONS, format_name
    out = Path(out)
    name = format_name(out)
    if "." in name and name.rsplit(".", 1)[-1].lower() in EXTENSIONS:
        raise error(f"--chunks writes a chunked graph directory, and this names a "
                    f"{EXTENSIONS[name.rsplit('.', 1)[-1].lower()]} file (name it e.g. "
                    f"{name.rsplit('.', 1)[0]}.chunked)", out)


def plan_has_shares(out) -> bool:
    """Whether ``out`` is a plan whose manifest lists shares (read before it is replaced; an
    unreadable manifest says no: the writer refuses or replaces it on its own terms)."""
    from pathlib import Path
    out = Path(out)
    if not (out / "manifest.json").is_file():
        return False
    from partplan.errors import PartplanError
    from partplan.nn.shares import has_shares
    from partplan.plan import read_manifest
    try:
        return has_shares(read_manifest(out))
    except PartplanError:
        return False
