"""``partplan run bfs|graph500|pagerank|wcc|sssp``: graph analytics on a plan.

Every job runs on N local processes (``--nprocs``, gloo on CPU / NCCL on
GPUs), as one rank under torchrun, or with every rank in this process
(``--backend local``). Outputs are in the graph's vertex order, written
atomically by rank 0.
"""
from __future__ import annotations

import argparse
import json
import sys

from partplan.cli._common import add_job_options, nonneg_float, positive_int

_EX = {
    "bfs": "  partplan run bfs g.plan --nprocs 2 --roots 16 --json\n"
           "  partplan run bfs routed.plan --nprocs 4 --roots 8 --json   # plan --layout routed:domain:2\n"
           "  partplan run bfs g.plan --backend local --root 0 --direction top-down --output parents.npz\n"
           "  torchrun --nproc-per-node 4 -m partplan run bfs g.plan --roots 64\n"
           "  partplan run bfs g.plan --nprocs 4 --direction top-down --steal fsteal --steal-solver lp --t4 64",
    "graph500": "  partplan run graph500 --scale 16 --nprocs 2\n"
                "  partplan run graph500 --scale 14 --nprocs 4 --partition block --json --plot levels.png\n"
                "  partplan run graph500 --scale 14 --nprocs 4 --layout routed:domain:2 --json",
    "pagerank": "  partplan run pagerank g.plan --nprocs 2 --damping 0.85 --tol 1e-8 --output pr.npy",
    "wcc": "  partplan run wcc g.plan --nprocs 2 --output labels.npy",
    "sssp": "  partplan run sssp g.plan --nprocs 2 --root 0 --output dist.npy\n"
            "  partplan run sssp g.plan --backend local --root 0 --steal fsteal --steal-topology tree:2x2 --json",
}
_HELP = {
    "bfs": ("breadth-first search from a plan (validated, TEPS)",
            "Direction-optimizing BFS on the plan's exchange (sparse/dense frontier per rank pair and level); "
            "every parent tree passes the five Graph500 checks or is reported invalid."),
    "graph500": ("Graph500 BFS benchmark: generate, partition, plan, 64 validated searches",
                 "Kronecker graph of 2^SCALE vertices, partitioned and planned in memory; 64 search keys of "
                 "degree >= 1, one untimed warm-up, five checks on every tree, harmonic-mean TEPS."),
    "pagerank": ("PageRank (networkx conventions) from a plan",
                 "Repeated SpMV on the plan's program of A^T; uniform teleport, dangling mass spread "
                 "uniformly, stop when the L1 change < n * tol."),
    "wcc": ("weakly connected components (label = smallest vertex id) from a plan",
            "Min-label propagation; only changed labels are exchanged."),
    "sssp": ("single-source shortest paths from a plan (non-negative weights)",
             "Bellman-Ford over the frontier of changed distances; inf = unreachable."),
}
OUT_SUFFIX = {"bfs": ".npz", "pagerank": ".npy", "wcc": ".npy", "sssp": ".npy"}


def _common(s, job: str) -> None:
    if job != "graph500":
        s.add_argument("plan", metavar="PLAN", help="plan directory (1d or routed:ROUTE:D layout; bfs also 2d:RxC)")
    add_job_options(s)
    s.add_argument("--route", action="store_true",
                   help="insist on a routed exchange through domain monitors: the plan must have a routed layout "
                        "(`partplan plan ... --layout routed:domain:D` or --route); a routed plan runs routed "
                        "without it")
    s.add_argument("--progress", action="store_true", help="progress lines on stderr")
    s.add_argument("--json", action="store_true", help="print the report as JSON")


def _bfs_args(s) -> None:
    g = s.add_mutually_exclusive_group()
    g.add_argument("--roots", type=positive_int, default=None, metavar="K",
                   help="search from K random vertices of degree >= 1 (default 64)")
    g.add_argument("--root", type=int, metavar="V", help="search from vertex V only")
    s.add_argument("--seed", type=int, default=0, help="seed of the search keys (default 0)")
    s.add_argument("--direction", choices=("auto", "top-down", "bottom-up"), default="auto",
                   help="auto (direction-optimizing, default), top-down or bottom-up only")
    s.add_argument("--alpha", type=nonneg_float, default=15.0, help="go bottom-up when the frontier's "
                   "edges > unexplored edges / alpha (default 15, GAPBS)")
    s.add_argument("--beta", type=nonneg_float, default=18.0, help="back to top-down when the frontier < "
                   "n / beta and shrinking (default 18, GAPBS)")
    s.add_argument("--plot", metavar="PNG", help="write a plot of per-level work and bytes")


def _steal_args(s) -> None:
    g = s.add_argument_group("load balance (frontier stealing, docs/steal.md)")
    g.add_argument("--steal", choices=("none", "fsteal", "fsteal+osteal"), default=None,
                   help="none (measure per-level balance only), fsteal (steal frontier edges each level by a MILP "
                        "over link costs), fsteal+osteal (also shrink the active ranks on sparse tails); "
                        "omitted: no balancer")
    g.add_argument("--steal-solver", choices=("cbc", "highs", "lp"), default="lp",
                   help="assignment solver: lp (LP relaxation rounded by largest remainder, default: ms per level), "
                        "cbc (PuLP MILP), highs (scipy milp)")
    g.add_argument("--steal-topology", metavar="TOPO", default=None,
                   help="link costs: a preset (tree:2x2, dgx1) or a topology JSON (partplan topology probe); "
                        "default every link costs 1 (+1 local)")
    g.add_argument("--steal-plot", metavar="PNG", default=None,
                   help="write a PNG of the first search's (sssp: the rounds') per-level balance before/after")
    g.add_argument("--t1", type=nonneg_float, default=1000.0, help="steal when the max frontier load >= T1 edges "
                   "(default 1000)")
    g.add_argument("--t2", type=nonneg_float, default=500.0, help="... and max - min >= T2 edges (default 500)")
    g.add_argument("--t3", type=nonneg_float, default=2e-3, help="OSteal decides only after a level shorter than "
                   "T3 seconds (default 0.002)")
    g.add_argument("--t4", type=nonneg_float, default=0.0, help="cache the adjacency of vertices of degree > T4 "
                   "on every rank (default 0: no cache)")


def register_job(sub) -> None:
    for job in ("bfs", "graph500", "pagerank", "wcc", "sssp"):
        short, desc = _HELP[job]
        s = sub.add_parser(job, help=short, description=desc, epilog="examples:\n" + _EX[job],
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _common(s, job)
        if job in ("bfs", "graph500"):
            _bfs_args(s)
        if job == "graph500":
            s.add_argument("--scale", type=positive_int, required=True, metavar="S", help="2^S vertices")
            s.add_argument("--edgefactor", type=positive_int, default=16, metavar="E",
                           help="edge tuples per vertex (default 16)")
            s.add_argument("--layout", default="1d", help="process layout: 1d (default), 2d:RxC, or "
                           "routed:domain:D / routed:source:D (1D through domains of D ranks)")
            s.add_argument("--partition", default="metis", metavar="metis|block|FILE",
                           help="METIS (default), contiguous blocks, or a partition file for this graph")
        if job == "pagerank":
            s.add_argument("--damping", type=nonneg_float, default=0.85, help="damping factor (default 0.85)")
            s.add_argument("--tol", type=nonneg_float, default=1e-6, help="stop when L1 change < n * tol "
                           "(default 1e-6, networkx)")
            s.add_argument("--max-iter", type=positive_int, default=100, help="iteration limit (default 100)")
        if job == "sssp":
            s.add_argument("--root", type=int, required=True, metavar="V", help="source vertex")
        if job in ("bfs", "graph500", "sssp"):
            _steal_args(s)
        if job in OUT_SUFFIX:
            s.add_argument("--output", metavar="FILE" + OUT_SUFFIX[job],
                           help={"bfs": "parents.npz: roots int64[K], parents int64[K, n] (-1 unreached)",
                                 "pagerank": "pr.npy: float64[n]", "wcc": "labels.npy: int64[n]",
                                 "sssp": "dist.npy: float64[n] (inf unreachable)"}[job])
        s.set_defaults(func=run_graph_cmd, graph_job=job)


def _config(args) -> dict:
    from partplan.errors import PlanError
    from partplan.runtime.graphjobs import check_output
    job = args.graph_job
    cfg = {"job": job, "backend": args.backend, "timeout": float(args.timeout or 60.0),
           "progress": bool(args.progress)}
    if job != "graph500":
        cfg["plan"] = args.plan
    if job in OUT_SUFFIX:
        cfg["output"] = None if args.output is None else str(check_output(args.output, OUT_SUFFIX[job]))
    if job in ("bfs", "graph500"):
        cfg.update({"root": args.root, "roots": args.roots or 64, "seed": args.seed, "direction": args.direction,
                    "alpha": args.alpha, "beta": args.beta, "plot": args.plot})
        if args.alpha <= 0 or args.beta <= 0:
            raise PlanError("--alpha and --beta must be > 0")
    if job == "graph500":
        from partplan.layouts import check_spec
        if check_spec(args.layout).split(":")[0] not in ("1d", "2d", "routed"):
            raise PlanError(f"--layout {args.layout}: BFS runs on 1d, 2d:RxC and routed:ROUTE:D layouts")
        if args.route and not args.layout.startswith("routed"):
            raise PlanError(f"--route: --layout {args.layout} is not routed (give --layout routed:domain:D)")
        if args.scale > 30:
            raise PlanError(f"--scale {args.scale}: at most 30 on one machine")
        n = args.nprocs or 1
        if args.backend != "local" and args.nprocs is None:
            import os
            n = int(os.environ.get("WORLD_SIZE", "1"))
        cfg["graph500"] = {"scale": args.scale, "edgefactor": args.edgefactor, "seed": args.seed,
                           "layout": args.layout, "partition": args.partition, "nprocs": n}
    if job == "pagerank":
        cfg.update({"damping": args.damping, "tol": args.tol, "max_iter": args.max_iter})
        if not 0 <= args.damping <= 1:
            raise PlanError(f"--damping must be in [0, 1], got {args.damping}")
        if args.tol <= 0:
            raise PlanError(f"--tol must be > 0, got {args.tol}")
    if job == "sssp":
        cfg["root"] = args.root
    if job == "graph500" and args.steal is not None and args.layout.split(":")[0] != "1d":
        raise PlanError(f"--steal runs on 1d layouts; --layout {args.layout} is not one")
    if job in ("bfs", "graph500", "sssp") and args.steal is not None:
        cfg["steal"] = {"mode": args.steal, "solver": args.steal_solver, "topology": args.steal_topology,
                        "t1": args.t1, "t2": args.t2, "t3": args.t3, "t4": args.t4}
        if args.steal_plot:
            cfg["steal"]["plot"] = str(check_output(args.steal_plot, ".png"))
    return cfg


def _precheck(cfg: dict, args) -> None:
    """Refuse a bad plan / root / process count before starting anything."""
    from partplan.errors import PlanError
    from partplan.plan.store import read_manifest
    from partplan.runtime.traversal import check_layout, traversal_program
    if "plan" not in cfg:
        return
    m = read_manifest(cfg["plan"])
    if args.route and not str(m["layout"]).startswith("routed"):
        raise PlanError(f"--route: {cfg['plan']} has layout {m['layout']}, not a routed one; plan the graph with "
                        f"`partplan plan ... --layout routed:domain:D` (or --topology ... --route domain)")
    check_layout(m, ("1d",) if cfg.get("steal") else ("1d", "2d", "routed") if cfg["job"] == "bfs"
                 else ("1d", "routed"))
    if cfg.get("steal"):
        from partplan.runtime.steal import StealConfig
        StealConfig.from_cfg(cfg, int(m["ranks"]))  # a bad topology / threshold fails here, before any process
    traversal_program(m)
    n = int(m["graph"]["n"])
    if cfg.get("root") is not None and not 0 <= int(cfg["root"]) < n:
        raise PlanError(f"--root {cfg['root']} is not a vertex id of the plan's graph (n = {n})")
    if args.nprocs is not None and args.backend != "local" and args.nprocs != m["ranks"]:
        raise PlanError(f"{cfg['plan']}: the plan is for {m['ranks']} ranks; --nprocs {args.nprocs} does not match")
    if args.backend == "local" and args.nprocs is not None and args.nprocs != m["ranks"]:
        raise PlanError(f"{cfg['plan']}: the plan is for {m['ranks']} ranks; --nprocs {args.nprocs} does not match")


def _print_text(rep: dict) -> None:
    job = rep["job"]
    head = f"{job}: n={rep['n']:,} nnz={rep['nnz']:,} ranks={rep['ranks']} backend={rep['backend']} layout={rep['layout']}"
    print(head)
    if job in ("bfs", "graph500"):
        s = rep["searches"]
        print(f"searches           {len(s)}  ({sum(1 for x in s if x.get('valid')) } valid)")
        if "teps_harmonic_mean" in rep:
            print(f"TEPS harmonic mean {rep['teps_harmonic_mean']:.4g}  (Norris std {rep['teps_harmonic_stddev']:.3g})")
            print(f"TEPS min/median/max {rep['teps_min']:.4g} / {rep['teps_median']:.4g} / {rep['teps_max']:.4g}")
            print(f"time median        {rep['time_median_s'] * 1e3:.3f} ms")
        print(f"edges examined     {rep['edges_examined_total']:,}")
        print(f"bytes match        {rep['bytes_match']}   chosen mode <= other: {rep['chosen_mode_le_other']}")
        if not rep.get("all_valid", True):
            bad = [x for x in s if not x.get("valid")]
            print(f"INVALID: root {bad[0]['root']}: {bad[0].get('validation_errors')}", file=sys.stderr)
    else:
        print(f"rounds             {rep['rounds']}   time {rep['time_s']:.4g} s")
        print(f"bytes              {rep['bytes_total']:,} predicted, {rep['bytes_measured_total']:,} measured")
        for k in ("sum", "components", "largest_component", "reached", "max_distance"):
            if k in rep:
                print(f"{k:<18} {rep[k]}")
    fam = rep.get("bytes_by_family") or {}
    if len(fam) > 1:  # routed (dom / cross) or 2d (col / row): where the bytes went
        msgs = rep.get("messages_by_family") or {}
        print("bytes by family    " + ", ".join(f"{f} {b:,} ({msgs.get(f, 0):,} messages)" for f, b in fam.items()))
    if rep.get("steal"):
        st = rep["steal"]
        gb, ga = st.get("geomean_before"), st.get("geomean_after")
        print(f"steal ({st['mode']}) {st['levels_triggered']} levels triggered, max/mean geomean "
              + (f"{gb:.3f} -> {ga:.3f}" if gb is not None else "-") + f", {st['stolen_edges']:,} edges stolen, "
              f"{st['steal_bytes']:,} bytes, solve {st['solve_s'] * 1e3:.1f} ms")
    if rep.get("output"):
        print(f"output             {rep['output']}")


def run_graph_cmd(args) -> int:
    from partplan.runtime.graphjobs import run_graph_job
    cfg = _config(args)
    _precheck(cfg, args)
    nprocs = args.nprocs
    if args.graph_job == "graph500" and args.backend != "local" and nprocs is None:
        from partplan.runtime.launch import under_torchrun
        from partplan.errors import PlanError
        if not under_torchrun():
            raise PlanError("give --nprocs N (processes to start here), or start the command with torchrun")
    rep = run_graph_job(cfg, nprocs=nprocs, threads=args.threads)
    if rep is None:
        return 0
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        _print_text(rep)
    ok = rep.get("all_valid", True) and rep.get("bytes_match", True)
    return 0 if ok else 1
