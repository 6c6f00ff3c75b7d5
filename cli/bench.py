"""``partplan bench``: the planner benchmark (see :mod:`partplan.bench.planner`).

Examples::

    partplan bench --quick --out bench-out
    partplan bench --datasets email-Enron copter2 rmat16 --k 16 64 --out bench-out --json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from ._common import fraction as _fraction, nonneg_float as _nonneg_float, positive_int as _positive_int
from partplan.partition.options import DEFAULT_IMBALANCE

STOCHASTIC_DEFAULTS = {"stochastic_k": 16, "stochastic_batches": 1000, "sampler": "neighbor:256:10,5", "theta": 0.02}


def register(subparsers) -> None:
    from partplan.bench.planner import ALL_METHODS, DATASETS, METHODS, QUICK_DATASETS

    p = subparsers.add_parser(
        "bench", help="benchmark partitioners: volume, bottleneck, messages, balance, time",
        description="Run block, random, METIS (graph model), Mt-KaHyPar (hypergraph model) and hypergraph + "
                    "bottleneck refinement on datasets × k; print total volume, max send/recv, messages, "
                    "compute imbalance and partition time normalized to random and to METIS with geometric "
                    "means; write CSV / JSON / PNG to --out.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"default datasets: {' '.join(DATASETS)}\nquick: {' '.join(QUICK_DATASETS)}\n"
               "rmatS = Graph500 R-MAT of scale S (generated)\n"
               "examples:\n  partplan bench --quick --out bench-out\n"
               "  partplan bench --datasets email-Enron rmat16 --k 16 64 --stochastic email-Enron")
    p.add_argument("--datasets", nargs="+", default=None, metavar="NAME", help="dataset names or rmatS (Graph500 R-MAT of scale S, edge factor 16, seed 1: `partplan datasets generate rmat --scale S --seed 1`, symmetrized, self loops removed)")
    p.add_argument("-k", "--k", nargs="+", type=_positive_int, default=None, help="part counts: the ranks each method partitions for (default 16 64)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(ALL_METHODS),
                   help=f"default: {' '.join(METHODS)}")
    p.add_argument("--quick", action="store_true", help="small embedded datasets + rmat14 only")
    p.add_argument("--out", default=None, metavar="DIR", help="write bench_planner.{csv,json,png} here")
    p.add_argument("--preset", default="DEFAULT", help="Mt-KaHyPar preset (default DEFAULT)")
    p.add_argument("--threads", type=_positive_int, default=1, help="Mt-KaHyPar threads (default 1)")
    p.add_argument("--imbalance", type=_fraction, default=DEFAULT_IMBALANCE,
                   help=f"ε: compute balance tolerance in [0, 10) (default {DEFAULT_IMBALANCE})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--refine-time-limit", type=_nonneg_float, default=None, help="seconds per refinement (>= 0)")
    p.add_argument("--stochastic", default=None, metavar="NAME",
                   help="also compare the stochastic model with the full-batch hypergraph on this dataset")
    p.add_argument("--stochastic-k", type=_positive_int, default=None,
                   help=f"with --stochastic: parts (default {STOCHASTIC_DEFAULTS['stochastic_k']})")
    p.add_argument("--stochastic-batches", type=_positive_int, default=None,
                   help=f"with --stochastic: fresh evaluation batches (default "
                        f"{STOCHASTIC_DEFAULTS['stochastic_batches']})")
    p.add_argument("--sampler", default=None,
                   help=f"with --stochastic: sampler spec (default {STOCHASTIC_DEFAULTS['sampler']})")
    p.add_argument("--theta", type=float, default=None,
                   help=f"with --stochastic: Hoeffding θ > 0 (default {STOCHASTIC_DEFAULTS['theta']})")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    from partplan.partition.engines import check_preset
    from partplan.bench.planner import DATASETS, QUICK_DATASETS, format_table, run_bench

    preset = check_preset(args.preset)
    _check_applies(args)
    if args.out:
        from partplan.io.outpath import check_output_folder
        check_output_folder(args.out)
    datasets = list(dict.fromkeys(args.datasets or (QUICK_DATASETS if args.quick else DATASETS)))  # each once
    from partplan.bench.planner import check_bench_names
    check_bench_names(datasets)
    _check_stochastic(args)
    ks = list(dict.fromkeys(args.k or [16, 64]))
    args.methods = list(dict.fromkeys(args.methods))
    t0 = time.perf_counter()

    from partplan.partition.heartbeat import StderrProgress
    progress = StderrProgress(t0, quiet=args.quiet)

    res = run_bench(datasets, ks, methods=args.methods, out=args.out, imbalance=args.imbalance, seed=args.seed,
                    preset=preset, threads=args.threads, refine_time_limit=args.refine_time_limit,
                    stochastic=args.stochastic, stochastic_k=args.stochastic_k,
                    stochastic_batches=args.stochastic_batches, stochastic_sampler=args.sampler,
                    stochastic_theta=args.theta,
                    progress=progress)
    if not res["rows"] and not res.get("stochastic"):
        from partplan.errors import PartplanError
        why = "; ".join(f"{sk['dataset']}{' k=' + str(sk['k']) if 'k' in sk else ''}: {sk['reason']}"
                        for sk in res["skipped"][:4]) or "no case"
        raise PartplanError(f"no case ran: every one was skipped ({why}{'; ...' if len(res['skipped']) > 4 else ''})")
    if args.json:
        print(json.dumps(res, indent=1, default=float))
    else:
        print(format_table(res))
        if args.out:
            print(f"\nwrote {args.out}/bench_planner.csv, .json, .png")
    return 0


def _check_applies(args) -> None:
    """Options that act only beside another are refused without it (they were ignored); the
    stochastic ones get their defaults here."""
    from partplan.errors import OptionError
    if args.quick and args.datasets:
        raise OptionError("--quick picks the small datasets; --datasets names others: give one of the two")
    given = ["--" + k.replace("_", "-") for k in STOCHASTIC_DEFAULTS if getattr(args, k) is not None]
    if given and args.stochastic is None:
        raise OptionError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} with --stochastic NAME only")
    for k, v in STOCHASTIC_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.refine_time_limit is not None and "hypergraph+refine" not in args.methods:
        raise OptionError("--refine-time-limit limits the refinement of --methods hypergraph+refine, which is "
                          "not among the methods run")


def _check_stochastic(args) -> None:
    """--theta (> 0), --sampler (the spec :func:`partplan.models.stochastic.make_sampler`
    parses) and the --stochastic dataset name (as --datasets names are checked),
    before any benchmark runs: one OptionError / DatasetError naming the option."""
    from partplan.bench.planner import check_bench_names
    from partplan.errors import DatasetError, OptionError
    from partplan.models.stochastic import make_sampler
    from partplan.partition.options import check_real
    check_real("--theta", args.theta, lo=0.0, lo_open=True)
    try:
        make_sampler(args.sampler)
    except OptionError as exc:
        raise OptionError(f"--sampler: {exc}") from None
    if args.stochastic is not None:
        try:
            check_bench_names([args.stochastic])
        except DatasetError as exc:
            raise DatasetError(f"--stochastic: {exc}") from None
