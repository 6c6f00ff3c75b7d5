"""``spmm``: ``Z = A @ H`` (or ``A^T @ G``) from a plan, measured — the
runtime's :func:`~partplan.runtime.spmm.spmm_config` checks the plan and the
features before any process starts, and every process runs
:func:`~partplan.runtime.spmm.spmm_rank` (the same work as
:func:`~partplan.runtime.spmm.run_spmm`)."""
from __future__ import annotations

import os

from ..errors import PlanError
from .args import MAX_REPEATS, int_range, job_config, positive_int
from .registry import Job, register

KEYS = ("ranks", "backend", "device", "kernels", "layout", "f", "dtype", "overlap", "bytes_predicted",
        "bytes_measured", "bytes_match", "allreduce_bytes_predicted", "allreduce_bytes_measured",
        "allreduce_bytes_match", "step_s", "gather_s", "exchange_s", "compute_s", "reduce_s", "fold_s",
        "oblivious_bytes", "oblivious_exchange_s", "bare_a2a_s", "aware_over_oblivious_exchange",
        "exchange_over_bare", "output")


def render_keys(rep: dict, keys=KEYS) -> str:
    """``key  value`` lines of ``rep`` for the keys present and set (floats to 4 digits)."""
    present = [k for k in keys if rep.get(k) is not None]
    w = max((len(k) for k in present), default=0)
    return "\n".join(f"{k:<{w}}  {rep[k]:.4g}" if isinstance(rep[k], float) else f"{k:<{w}}  {rep[k]}"
                     for k in present)


def _arguments(s) -> None:
    s.add_argument("plan", metavar="PLAN", help="plan directory")
    s.add_argument("--feature-file", dest="features", metavar="H.npy",
                   help="n × f float32/float64 features (default: random)")
    s.add_argument("-f", "--features", dest="f", type=positive_int, default=16, metavar="F",
                   help="feature width f of the random features (default 16)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random features (default 0)")
    s.add_argument("--dtype", choices=("float32", "float64"), help="compute type (default: H's, else float32)")
    s.add_argument("-o", "--output", metavar="Z.npy", help="write Z (n × f, vertex order)")
    s.add_argument("--repeat", type=int_range(1, MAX_REPEATS), default=5, metavar="R",
                   help=f"timed repeats (default 5, at most {MAX_REPEATS:,})")
    s.add_argument("--warmup", type=int_range(0, MAX_REPEATS), default=1, metavar="W",
                   help=f"untimed warm-up runs (default 1, at most {MAX_REPEATS:,})")
    s.add_argument("--compare", default="", metavar="LIST",
                   help="comma list: oblivious (whole block rows, CAGNET-style), bare (bare all_to_all_single)")
    s.add_argument("--program", choices=("forward", "backward"), default="forward",
                   help="forward A @ H (default) or backward A^T @ G")
    s.add_argument("--overlap", choices=("on", "off"), default="on",
                   help="overlap the exchange with the local SpMM where the plan allows (default on)")


def _configure(args) -> dict:
    if args.features:   # -f and --seed shape the random features; a file's width is its own
        given = [flag for flag, on in (("-f", args.f != 16), ("--seed", args.seed != 0)) if on]
        if given:
            from ..errors import OptionError
            raise OptionError(f"{' and '.join(given)} shape{'s' if len(given) == 1 else ''} the random features; "
                              f"with --feature-file the features (and their width) are the file's")
    cfg = job_config(args, "plan", "features", "f", "seed", "dtype", "output", "repeat", "warmup", "program",
                     "overlap")
    names = [c.strip() for c in args.compare.split(",")]
    if args.compare.strip() and not all(names):      # "a,,b", ",": a name left out, not silence
        from ..errors import OptionError
        raise OptionError(f"--compare {args.compare!r}: an empty name in the list (give names separated by commas)")
    cfg["compare"] = [c for c in names if c]
    return cfg


def _prepare(cfg: dict, nprocs: int | None, threads: int | None) -> dict:
    from ..runtime.spmm import spmm_config
    check_feature_budget(cfg)
    return spmm_config(cfg, nprocs)


def check_feature_budget(cfg: dict) -> None:
    """rows × f × itemsize of H, Z and the exchange buffers (3 copies) against
    the memory budget (:mod:`partplan._budget`), before the features are
    scanned or any process starts: f from ``--feature-file``'s ``.npy``
    header (opened as a regular file, never the data) or ``-f``; rows from
    the plan's manifest. One error naming the option or the file."""
    import numpy as np

    from ..io._common import npy_header, open_regular
    from .._budget import check_array_bytes
    from ..plan.store import plan_rows
    n = plan_rows(cfg["plan"])
    dtype = np.dtype(cfg.get("dtype") or "float32") if cfg.get("dtype") in (None, "float32", "float64") else None
    if cfg.get("features"):
        path = cfg["features"]
        fd, _ = open_regular(path, error=lambda problem: PlanError(f"{path}: {problem}"))
        with os.fdopen(fd, "rb") as fh:
            try:
                shape, hdtype, _ = npy_header(fh)
            except (ValueError, EOFError, OSError):
                return   # not a .npy: the runtime's own check (spmm_config) names what it is
        if len(shape) != 2:
            return       # likewise: spmm_config refuses the shape with its own message
        f = int(shape[1])
        itemsize = max(hdtype.itemsize, dtype.itemsize if dtype is not None else 0)
        check_array_bytes(n, f, itemsize, f"{path}: features of width f = {f}", path=path, field="shape",
                          copies=3)
    else:
        f = int(cfg.get("f") or 16)
        check_array_bytes(n, f, dtype.itemsize if dtype is not None else 8, f"features of width f = {f}",
                          option="-f", copies=3)


def _rank(ctx, cfg: dict) -> dict | None:
    from ..runtime.spmm import spmm_rank
    return spmm_rank(ctx, cfg)


register(Job(
    name="spmm", help="Z = A @ H from a plan, on N processes",
    description="Run the plan's forward program (Z = A @ H) or backward program (A^T @ G) on N processes "
                "and report predicted vs measured bytes per (rank, peer) and per-phase times.",
    examples="  partplan run spmm g.plan --nprocs 4 -f 64 --compare oblivious,bare --json\n"
             "  partplan run spmm g.plan --nprocs 2 --feature-file H.npy --output Z.npy\n"
             "  partplan run spmm g.plan --backend local --kernels torch --device cuda --json\n"
             "  torchrun --nproc-per-node 4 -m partplan run spmm g.plan --json",
    add_arguments=_arguments, configure=_configure, prepare=_prepare, run=_rank, render=render_keys,
    output="npy"))
