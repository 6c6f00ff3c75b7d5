"""``partplan run spmm PLAN --nprocs N [...]``: execute a plan on torch.distributed and measure it.

``--nprocs N`` starts N local processes (gloo on CPU, NCCL on GPUs); started
by torchrun instead (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set), the
same command runs as one rank of that job::

    torchrun --nproc-per-node 4 -m partplan run spmm g.plan --json

``--backend local`` runs every rank in this process (LocalComm, exact).
H.npy / Z.npy are n × f in the graph's vertex order; each rank reads only its
rows of H and writes only its rows of Z (renamed into place when complete).
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

from partplan.cli._common import add_job_options, nonneg_int, positive_int, print_keys

# modules adding `partplan run JOB` sub-commands (each exposes register_job(subparsers))
RUN_JOBS: list[str] = ["run_graph"]

_KEYS = ("ranks", "backend", "layout", "f", "dtype", "bytes_predicted", "bytes_measured", "bytes_match",
         "step_s", "gather_s", "exchange_s", "compute_s", "reduce_s", "fold_s", "oblivious_bytes",
         "oblivious_exchange_s", "bare_a2a_s", "aware_over_oblivious_exchange", "exchange_over_bare")


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="execute a plan (distributed SpMM) and measure it",
                              description="Execute plans on torch.distributed.")
    sub = p.add_subparsers(dest="job", metavar="JOB")
    s = sub.add_parser(
        "spmm", help="Z = A @ H from a plan, on N processes",
        description="Run the plan's forward program (Z = A @ H) or backward program (A^T @ G) on N processes "
                    "and report predicted vs measured bytes per (rank, peer) and per-phase times.",
        epilog="examples:\n  partplan run spmm g.plan --nprocs 4 -f 64 --compare oblivious,bare --json\n"
               "  partplan run spmm g.plan --nprocs 2 --features H.npy --output Z.npy\n"
               "  torchrun --nproc-per-node 4 -m partplan run spmm g.plan --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("plan", metavar="PLAN", help="plan directory")
    add_job_options(s)
    s.add_argument("--features", metavar="H.npy", help="n × f float32/float64 features (default: random)")
    s.add_argument("-f", type=positive_int, default=16, metavar="F", help="width of random features (default 16)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random features (default 0)")
    s.add_argument("--dtype", choices=("float32", "float64"), help="compute type (default: H's, else float32)")
    s.add_argument("--output", metavar="Z.npy", help="write Z (n × f, vertex order)")
    s.add_argument("--repeat", type=positive_int, default=5, metavar="R", help="timed repeats (default 5)")
    s.add_argument("--warmup", type=nonneg_int, default=1, metavar="W", help="untimed warm-up runs (default 1)")
    s.add_argument("--compare", default="", metavar="LIST",
                   help="comma list: oblivious (whole block rows, CAGNET-style), bare (bare all_to_all_single)")
    s.add_argument("--program", choices=("forward", "backward"), default="forward",
                   help="forward A @ H (default) or backward A^T @ G")
    s.add_argument("--kernel", choices=("auto", "scipy", "torch"), default="auto",
                   help="local SpMM: auto (scipy on CPU, torch CSR on CUDA), scipy, torch")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.set_defaults(func=run_spmm_cmd)
    for name in RUN_JOBS:  # further jobs: a module of this package with register_job(sub)
        importlib.import_module(f"partplan.cli.{name}").register_job(sub)
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])


def run_spmm_cmd(args) -> int:
    from partplan.runtime.spmm import run_spmm
    compare = [c.strip() for c in args.compare.split(",") if c.strip()]
    if args.output:
        from partplan.outpath import check_output_file
        check_output_file(args.output, kind="npy")
    rep = run_spmm(args.plan, nprocs=args.nprocs, backend=args.backend, features=args.features, f=args.f,
                   seed=args.seed, dtype=args.dtype, output=args.output, repeat=args.repeat, warmup=args.warmup,
                   compare=compare, kernel=args.kernel, timeout=args.timeout or 60.0, program=args.program,
                   threads=args.threads)
    if rep is None:  # a non-zero rank under torchrun
        return 0
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print_keys(rep, _KEYS)
        if not rep["bytes_match"]:
            print(f"BYTES DIFFER: {rep.get('bytes_mismatch')}", file=sys.stderr)
    return 0 if rep["bytes_match"] else 1
