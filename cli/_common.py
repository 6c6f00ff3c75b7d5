"""Pieces every command shares: loading GRAPH arguments and argparse types
that reject bad numbers with one clear line."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from partplan.errors import GraphFormatError


def load_graph(spec: str, *, fetch: bool = False, symmetrize: bool = False):
    """A graph file (any format :func:`partplan.io.read_graph` reads) or a
    registered dataset name (:func:`partplan.datasets.load_graph`; with
    ``fetch`` a missing download is fetched first). ``symmetrize`` adds Aᵀ."""
    from partplan import datasets
    from partplan.io import read_graph

    path = Path(spec)
    if path.exists():
        if path.is_dir():
            raise GraphFormatError("is a directory, not a graph file", path)
        return read_graph(path, symmetrize=symmetrize)
    if spec not in datasets.names():
        raise GraphFormatError("no such file, and not a registered dataset name "
                               "(see `partplan datasets list`)", spec)
    g = datasets.load_graph(spec, fetch=fetch)  # DatasetError says how to fetch it
    return g.normalize(symmetrize=True) if symmetrize and not g.is_symmetric() else g


def _number(text: str, kind, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    v = _number(text, int, "a positive integer")
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    v = _number(text, int, "an integer >= 0")
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    v = _number(text, float, "a number")
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return v


def fraction(text: str) -> float:
    """argparse type: an imbalance / tolerance in [0, 10)."""
    v = _number(text, float, "a number")
    if not (0 <= v < 10):
        raise argparse.ArgumentTypeError(f"expected a number in [0, 10), got {text}")
    return v


def print_keys(rep: dict, keys) -> None:
    """``key  value`` lines of ``rep`` for the keys present (floats to 4 digits)."""
    present = [k for k in keys if k in rep]
    w = max((len(k) for k in present), default=0)
    for k in present:
        v = rep[k]
        print(f"{k:<{w}}  {v:.4g}" if isinstance(v, float) else f"{k:<{w}}  {v}")


def add_job_options(parser) -> None:
    """The options every distributed job shares: --nprocs, --backend, --timeout, --threads."""
    parser.add_argument("--nprocs", type=positive_int, metavar="N",
                        help="processes to start here (= the plan's ranks); omit under torchrun")
    parser.add_argument("--backend", choices=("gloo", "nccl", "local"), default="gloo",
                        help="gloo (CPU, default), nccl (CUDA GPUs) or local (all ranks in this process)")
    parser.add_argument("--timeout", type=nonneg_float, default=60.0, metavar="S",
                        help="seconds a rank waits for a peer before failing (default 60)")
    parser.add_argument("--threads", type=positive_int, default=1, metavar="T",
                        help="torch/OpenMP threads per spawned process (default 1)")
