"""Traversal jobs: ``bfs`` (on a plan directory) and ``graph500`` (Graph500
kernel 2, the searches, on the graph and plan of kernel 1).

The searches run :class:`~partplan.runtime.bfs.BfsEngine` on the plan's
program of ``A^T``; every parent tree is checked by the five Graph500 checks
(:mod:`partplan.runtime.graph500`) against the input edges; TEPS are
harmonic means over the valid searches. Graph500's set-up — the Kronecker
generator, the partitioner, the plan — is no job's: the CLI prepares it
(:mod:`partplan.cli._graph500`) and the job gets the plan directory
(``cfg["plan"]``) and the Kronecker tuples (``cfg["graph500"]["edges"]``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import OptionError, PartitionError, PlanError
from ..layouts import layout_class, parse_layout
from .args import nonneg_float, positive_float, positive_int
from .common import (PROGRESS_EVERY_S, add_output_option, add_plan_options, atomic_save, base_report, checked_output,
                     family_totals, plan_inputs, precheck_plan, progress, render_footer, render_header,
                     resolved_kernels)
from .registry import Job, register


# ----------------------------------------------------------------------------- inputs
def plan_edges(manifest: dict, shards) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The nonzeros (row, col, value or None) of A from the forward program's
    local blocks of ``shards`` (global ids)."""
    from ..runtime.traversal import program_ext_ids, program_parts
    chain, spmm, _ = program_parts(manifest, "forward")
    sp = spmm["id"]
    rs, cs, ds = [], [], []
    for rp in shards:
        ext = program_ext_ids(rp, chain, "forward")
        ip = np.asarray(rp[f"{sp}.indptr"], dtype=np.int64)
        rs.append(np.repeat(np.asarray(rp[f"{sp}.row_ids"], dtype=np.int64), np.diff(ip)))
        cs.append(ext[np.asarray(rp[f"{sp}.indices"], dtype=np.int64)])
        if rp.has(f"{sp}.data"):
            ds.append(np.asarray(rp[f"{sp}.data"], dtype=np.float64))
    r, c = np.concatenate(rs).astype(np.int64), np.concatenate(cs).astype(np.int64)
    return r, c, (np.concatenate(ds) if ds else None)


def _graph500_inputs(ctx, cfg: dict):
    """(manifest, shards, comm, validation input) of a Graph500 run: the plan
    the CLI prepared and the Kronecker tuples (every rank draws the search
    keys from them). Under torchrun every process prepared its own plan: they
    must hold the same partition (checked, not assumed)."""
    gp = cfg["graph500"]
    if not cfg.get("plan") or not gp.get("edges"):
        raise PlanError("graph500 runs on a prepared plan and its Kronecker tuples (cfg['plan'], "
                        "cfg['graph500']['edges']): start it with `partplan run graph500`, which generates, "
                        "partitions and plans the graph (partplan.cli._graph500.prepared)")
    m, shards, comm = plan_inputs(ctx, cfg)
    if not ctx.local:  # every rank must have built the same plan (checked, not assumed)
        h = float(int(str(m["partition_file"]["sha256"])[:12], 16))
        mx = comm.allreduce_world([np.array([h])], "max")[0][0]
        sm = comm.allreduce_world([np.array([h])], "sum")[0][0]
        if mx != h or sm != h * comm.world:
            raise PlanError("the ranks built different Graph500 partitions (partitioner not deterministic "
                            "here); use --partition block or a partition file")
    e = Path(gp["edges"])
    src, dst = np.load(e / "src.npy", allow_pickle=False), np.load(e / "dst.npy", allow_pickle=False)
    return m, shards, comm, {"src": src, "dst": dst, "directed": False, "n": int(m["graph"]["n"])}


def _plan_validation(ctx, cfg: dict, m: dict, shards) -> dict | None:
    """The leader's validation input for a plan directory: the plan's edges
    (each undirected edge once)."""
    if not (ctx.leader and cfg.get("validate", True)):
        return None
    from ..plan.store import load_plan
    r, c, _ = plan_edges(m, shards if ctx.local else load_plan(cfg["plan"]).ranks)
    sym = bool(m["graph"]["symmetric"])
    if sym:
        keep = r <= c
        r, c = r[keep], c[keep]
    return {"src": r, "dst": c, "directed": not sym, "n": int(m["graph"]["n"])}


def _roots(cfg: dict, eng, val) -> np.ndarray:
    """The search keys: ``root``, else ``roots`` random vertices of degree >= 1
    (Graph500's search keys on a generated graph; the same on every rank)."""
    from ..runtime.graph500 import search_keys
    from ..runtime.traversal import world_sum
    if cfg.get("root") is not None:
        return np.array([eng.check_root(cfg["root"])], dtype=np.int64)
    k = int(cfg.get("roots") or 64)
    seed = int(cfg.get("seed", 0))
    if val is not None and cfg.get("graph500"):
        return search_keys(val["src"], val["dst"], val["n"], k, seed)
    # degree >= 1 without self loops, from the plan's blocks (edges into each row; for a directed
    # graph also out of it): one length-n sum over ranks; every rank draws the same keys
    vecs = []
    for rg in eng.rgs:
        r_of = np.repeat(np.arange(rg.nrows), np.diff(rg.indptr))
        u, v = rg.ext_ids[rg.indices], rg.row_ids[r_of]
        keep = u != v
        vecs.append(np.bincount(v[keep], minlength=eng.n) + np.bincount(u[keep], minlength=eng.n))
    deg = world_sum(eng.comm, vecs)
    cand = np.flatnonzero(deg > 0)
    from .._seed import numpy_seed
    rng = np.random.default_rng(np.random.SeedSequence([numpy_seed(seed), 500]))   # any integer seed
    return np.sort(rng.choice(cand, size=min(k, cand.size), replace=False)) if cand.size else cand


# ----------------------------------------------------------------------------- the searches
def run_bfs(ctx, cfg: dict) -> dict | None:
    """BFS searches from ``cfg["root"]`` or ``cfg["roots"]`` keys on the plan
    ``cfg["plan"]`` or a Graph500 graph (``cfg["graph500"]``); the leader
    validates every tree and returns the report."""
    from ..runtime.bfs import BfsEngine
    from ..runtime.graph500 import BfsValidator, teps_stats
    if cfg.get("graph500"):
        m, shards, comm, val = _graph500_inputs(ctx, cfg)
    else:
        m, shards, comm = plan_inputs(ctx, cfg)
        val = _plan_validation(ctx, cfg, m, shards)
    leader = ctx.leader
    kernels = resolved_kernels(cfg, ctx)
    eng = BfsEngine(m, shards, comm, direction=cfg.get("direction", "auto"), alpha=float(cfg.get("alpha", 15.0)),
                    beta=float(cfg.get("beta", 18.0)), kernels=kernels)
    if cfg.get("steal"):  # frontier stealing on top-down levels (partplan.runtime.steal)
        from ..runtime.steal import Balancer, StealConfig
        eng.balancer = Balancer(comm, eng.rgs, eng.n, StealConfig.from_cfg(cfg, int(m["ranks"])))
    roots = _roots(cfg, eng, val)
    if roots.size == 0:
        raise PlanError("the graph has no vertex with an edge: no BFS root to search from")
    if cfg.get("warmup", 1):
        eng.search(int(roots[0]))  # untimed warm-up (lazy connections, numba compile)
    searches, parents = [], []
    validator = None if val is None else BfsValidator(val["src"], val["dst"], val["n"], directed=val["directed"])
    for k, root in enumerate(roots):
        res = eng.search(int(root))
        entry = {"root": int(root), "time_s": res.time_s, "edges_examined": res.edges_examined,
                 "levels": [r.to_json() for r in res.records]}
        if leader and validator is not None:
            v = validator.check(int(root), res.parents, levels=res.levels)
            entry.update({"valid": v.ok, "failed_checks": v.failed, "edges": v.nedge,
                          "teps": v.nedge / res.time_s if res.time_s > 0 else 0.0})
            if not v.ok:
                entry["validation_errors"] = list(v.messages.values())
        if leader and cfg.get("output"):
            parents.append(res.parents)
        searches.append(entry)
        progress(cfg, leader, f"search {k + 1}/{roots.size}: root {int(root)}, {len(res.records)} levels, "
                              f"{res.time_s * 1e3:.1f} ms" + ("" if "valid" not in entry else
                                                              f", {'valid' if entry['valid'] else 'INVALID'}"))
    if not leader:
        return None
    if cfg.get("output"):
        P = np.stack(parents).astype(np.int64)
        atomic_save(Path(cfg["output"]), lambda tmp: np.savez(open(tmp, "wb"), roots=roots.astype(np.int64),
                                                               parents=P))
    levels = [lv for s in searches for lv in s["levels"]]
    rep = {**base_report(cfg, m, ctx, kernels),
           "direction": eng.direction, "alpha": eng.alpha, "beta": eng.beta, "roots": int(roots.size),
           "searches": searches,
           "bytes_predicted": int(sum(lv["bytes"] for lv in levels)),
           "bytes_measured": int(sum(lv["bytes_measured"] for lv in levels)),
           "bytes_match": all(lv["bytes"] == lv["bytes_measured"] for lv in levels),
           "chosen_mode_le_other": all(lv["bytes"] <= min(lv["bytes_sparse"], lv["bytes_dense"]) for lv in levels),
           "edges_examined_total": int(sum(s["edges_examined"] for s in searches)),
           "bytes_by_family": family_totals(levels, "bytes_by_family"),
           "messages_by_family": family_totals(levels, "messages_by_family"),
           "output": cfg.get("output")}
    if val is not None:
        ok = [s for s in searches if s["valid"]]
        rep["all_valid"] = len(ok) == len(searches)
        if ok and all(s["time_s"] > 0 for s in ok):
            rep.update(teps_stats([s["edges"] for s in ok], [s["time_s"] for s in ok]))
    if cfg.get("graph500"):
        rep["graph500"] = {k: cfg["graph500"][k] for k in ("scale", "edgefactor", "seed", "partition")
                           if k in cfg["graph500"]}
    if eng.balancer is not None:
        from ..runtime.steal import steal_summary
        rep["steal"] = steal_summary(cfg, levels, eng.balancer, plot_levels=searches[0]["levels"])
    if cfg.get("plot"):
        from ..runtime.traversal_plot import plot_levels
        plot_levels(rep, cfg["plot"])
        rep["plot"] = cfg["plot"]
    return rep


def render_bfs(rep: dict) -> str:
    """The text report of a bfs / graph500 run."""
    s = rep["searches"]
    out = render_header(rep)
    out.append(f"searches           {len(s)}  ({sum(1 for x in s if x.get('valid'))} valid)")
    if "teps_harmonic_mean" in rep:
        out.append(f"TEPS harmonic mean {rep['teps_harmonic_mean']:.4g}  (Norris std {rep['teps_harmonic_stddev']:.3g})")
        out.append(f"TEPS min/median/max {rep['teps_min']:.4g} / {rep['teps_median']:.4g} / {rep['teps_max']:.4g}")
        out.append(f"time median        {rep['time_median_s'] * 1e3:.3f} ms")
    out.append(f"edges examined     {rep['edges_examined_total']:,}")
    out.append(f"bytes match        {rep['bytes_match']}   chosen mode <= other: {rep['chosen_mode_le_other']}")
    return "\n".join(out + render_footer(rep))


def bfs_problem(rep: dict) -> str | None:
    """An invalid tree (the first one's root and errors) or differing bytes."""
    bad = [x for x in rep["searches"] if x.get("valid") is False]
    if bad:
        return f"INVALID: root {bad[0]['root']}: {bad[0].get('validation_errors')}"
    return None if rep.get("bytes_match", True) else "BYTES DIFFER between prediction and measurement"


# ----------------------------------------------------------------------------- CLI
def add_search_options(s) -> None:
    """--roots/--root, --seed, --direction, --alpha, --beta, --plot."""
    g = s.add_mutually_exclusive_group()
    g.add_argument("--roots", type=positive_int, default=None, metavar="K",
                   help="search from K random distinct vertices of degree >= 1 (default 64; all of them when "
                        "the graph has fewer: the report's searches say how many)")
    g.add_argument("--root", type=int, metavar="V", help="search from vertex V only")
    s.add_argument("--seed", type=int, default=0, help="seed of the search keys (default 0)")
    s.add_argument("--direction", choices=("auto", "top-down", "bottom-up"), default="auto",
                   help="auto (direction-optimizing, default), top-down or bottom-up only")
    s.add_argument("--alpha", type=positive_float, default=15.0, help="go bottom-up when the frontier's "
                   "edges > unexplored edges / alpha (default 15, GAPBS)")
    s.add_argument("--beta", type=positive_float, default=18.0, help="back to top-down when the frontier < "
                   "n / beta and shrinking (default 18, GAPBS)")
    s.add_argument("--plot", metavar="PNG", help="write a plot of per-level work and bytes")


def add_steal_options(s) -> None:
    """The frontier-stealing options (docs/design/stealing.md) of bfs, graph500 and sssp."""
    g = s.add_argument_group("load balance (frontier stealing, docs/design/stealing.md)")
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


def steal_config(args) -> dict | None:
    """``cfg["steal"]`` from the stealing options (None without --steal; the others given without it
    are refused: they would be ignored)."""
    if args.steal is None:
        given = [flag for flag, value, default in (
            ("--steal-solver", args.steal_solver, "lp"), ("--steal-topology", args.steal_topology, None),
            ("--steal-plot", args.steal_plot, None), ("--t1", args.t1, 1000.0), ("--t2", args.t2, 500.0),
            ("--t3", args.t3, 2e-3), ("--t4", args.t4, 0.0)) if value != default]
        if given:
            raise OptionError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} with --steal only "
                              f"(none, fsteal or fsteal+osteal)")
        return None
    st = {"mode": args.steal, "solver": args.steal_solver, "topology": args.steal_topology,
          "t1": args.t1, "t2": args.t2, "t3": args.t3, "t4": args.t4}
    if args.steal_plot:
        st["plot"] = checked_output(args.steal_plot, "png")
    return st


def _search_config(args) -> dict:
    from .args import job_config
    cfg = job_config(args, "root", "seed", "direction", "alpha", "beta", "plot")   # --alpha / --beta: > 0 by type
    cfg["plot"] = checked_output(args.plot, "png")   # a NAME.png that can be written, before any worker starts
    cfg["roots"] = args.roots or 64
    steal = steal_config(args)
    if steal is not None:
        cfg["steal"] = steal
    return cfg


def _bfs_arguments(s) -> None:
    add_plan_options(s, capability="bfs (1d, 2d:RxC, routed:ROUTE:D)")
    add_search_options(s)
    add_steal_options(s)
    add_output_option(s, "npz", "parents.npz: roots int64[K], parents int64[K, n] (-1 unreached)")


def _bfs_config(args) -> dict:
    cfg = _search_config(args)
    cfg.update({"plan": args.plan, "output": args.output})
    m = precheck_plan(cfg, args, capability="bfs")
    _check_parents_output(cfg, int(m["graph"]["n"]))
    return cfg


def _check_parents_output(cfg: dict, n: int) -> None:
    """``-o``'s parents (int64[K, n], K = 1 with ``--root``, else the search keys) within the memory
    budget before any search: the leader holds them all, then stacks them once more to save them."""
    if not cfg.get("output"):
        return
    from .._budget import check_array_bytes
    keys = 1 if cfg.get("root") is not None else min(int(cfg.get("roots") or 64), n)
    check_array_bytes(keys, n, 8, f"the parents output (int64[{keys}, n] for {keys} search keys)", option="-o",
                      copies=2)


def _graph500_arguments(s) -> None:
    s.add_argument("--progress", action="store_true", default=None,
                   help=f"a progress line per search on stderr (default: one every {PROGRESS_EVERY_S:g} s of a "
                        f"long run; -q: none)")
    s.add_argument("--routed", dest="route", action="store_true", help="insist on a routed exchange (with --layout routed:...)")
    add_search_options(s)
    s.add_argument("--scale", type=positive_int, required=True, metavar="S", help="2^S vertices")
    s.add_argument("--edgefactor", type=positive_int, default=16, metavar="E",
                   help="edge tuples per vertex (default 16)")
    s.add_argument("--layout", default="1d", help="process layout: 1d (default), 2d:RxC, or "
                   "routed:domain:D / routed:source:D (1D through domains of D ranks)")
    s.add_argument("--partition", default="metis", metavar="metis|block|FILE",
                   help="METIS (default), contiguous blocks, or a partition file for this graph")
    add_steal_options(s)


def _graph500_config(args) -> dict:
    import os

    from ..layouts import check_spec
    from ..runtime.launch import under_torchrun
    cfg = _search_config(args)
    lay = layout_class(check_spec(args.layout))
    if not lay.bfs:
        raise PlanError(f"--layout {args.layout}: BFS runs on 1d, 2d:RxC and routed:ROUTE:D layouts")
    if args.route and not lay.routes:
        raise PlanError(f"--route: --layout {args.layout} is not routed (give --layout routed:domain:D)")
    if cfg.get("steal") and not lay.stealing:
        raise PlanError(f"--steal runs on 1d layouts; --layout {args.layout} is not one")
    if args.scale > 30:
        raise PlanError(f"--scale {args.scale}: at most 30 on one machine")
    if cfg.get("root") is not None and not 0 <= int(cfg["root"]) < 2 ** args.scale:   # before the generation
        raise PlanError(f"--root {cfg['root']} is not a vertex id of the generated graph (n = 2^{args.scale} = "
                        f"{2 ** args.scale:,})")
    if args.backend != "local" and args.nprocs is None and not under_torchrun():
        raise PlanError("give --nprocs N (processes to start here), or start the command with torchrun")
    n = args.nprocs or (int(os.environ.get("WORLD_SIZE", "1")) if args.backend != "local" else 1)
    try:
        parse_layout(args.layout, n)  # the layout fits n ranks
    except PartitionError as exc:
        how = "--nprocs" if args.nprocs is not None or args.backend == "local" else "torchrun's process count"
        raise PlanError(f"{exc}: give {how} as the layout's ranks ({n} now)") from None
    if cfg.get("steal"):
        from ..runtime.steal import StealConfig
        StealConfig.from_cfg(cfg, n)
    cfg["graph500"] = {"scale": args.scale, "edgefactor": args.edgefactor, "seed": args.seed,
                       "layout": args.layout, "partition": args.partition, "nprocs": n}
    prepared = getattr(args, "graph500_prepared", None)  # the CLI's set-up: plan directory and tuples folder
    if prepared is not None:
        cfg["plan"], cfg["graph500"]["edges"] = prepared
    return cfg


_BFS_EXAMPLES = """\
  partplan run bfs g.plan --nprocs 2 --roots 16 --json
  partplan run bfs routed.plan --nprocs 4 --roots 8 --json   # plan --layout routed:domain:2
  partplan run bfs g.plan --backend local --root 0 --direction top-down --output parents.npz
  partplan run bfs g.plan --backend local --kernels torch --device cuda --roots 8 --json
  torchrun --nproc-per-node 4 -m partplan run bfs g.plan --roots 64
  partplan run bfs g.plan --nprocs 4 --direction top-down --steal fsteal --steal-solver lp --t4 64"""

register(Job(
    name="bfs", help="breadth-first search from a plan (validated, TEPS)",
    description="Direction-optimizing BFS on the plan's exchange (sparse/dense frontier per rank pair and level); "
                "every parent tree passes the five Graph500 checks or is reported invalid.",
    examples=_BFS_EXAMPLES, add_arguments=_bfs_arguments, configure=_bfs_config, run=run_bfs,
    render=render_bfs, problem=bfs_problem, output="npz"))

register(Job(
    name="graph500", help="Graph500 BFS benchmark: generate, partition, plan, 64 validated searches",
    description="Kronecker graph of 2^SCALE vertices, partitioned and planned in memory; 64 search keys of "
                "degree >= 1, one untimed warm-up, five checks on every tree, harmonic-mean TEPS.",
    examples="  partplan run graph500 --scale 16 --nprocs 2\n"
             "  partplan run graph500 --scale 14 --nprocs 4 --partition block --json --plot levels.png\n"
             "  partplan run graph500 --scale 14 --nprocs 4 --layout routed:domain:2 --json",
    add_arguments=_graph500_arguments, configure=_graph500_config, run=run_bfs, render=render_bfs,
    problem=bfs_problem))
