"""Frontier stealing: per-level load balance, solver times, OSteal on a long
tail, end-to-end gloo time with vs without — all measured in this run.

1. Balance (LocalComm, top-down BFS so every level is a stealing candidate):
   R-MAT (Graph500 generator) and email-Enron (a real power-law graph), with
   random, METIS and hypergraph (Mt-KaHyPar) partitions at p ranks; on the
   levels where stealing triggers: geometric mean of load_max_over_mean
   before and after, the worst after/before ratio, and the geometric mean of
   the bound set by the largest single frontier vertex.
2. Solver time per level (ms) for p = 4, 8, 16, 64 with cbc, highs, lp on the
   real per-rank loads of R-MAT BFS levels (1D random partition: l_i = edges
   from the frontier into rank i's vertices, what the engine measures); the
   MILP objective's distance to the LP bound.
3. OSteal on a long-diameter grid (a 2D strip): active ranks per level and
   search time with none / fsteal / fsteal+osteal (LocalComm).
4. End to end on gloo p = 4: Graph500 BFS time with vs without stealing.

    python benchmarks/bench_steal.py                       # scale 16, p = 4
    python benchmarks/bench_steal.py --scale 14 --skip-gloo --png /tmp/balance.png --json steal.json
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from partplan.plan import build_plan
from partplan.runtime.bfs import BfsEngine
from partplan.runtime.comm import LocalComm
from partplan.runtime.graph500 import BfsValidator, search_keys

from partplan.cli._graph500 import execute_graph500, graph500_graph
from partplan.runtime.steal import Balancer, StealConfig, cost_matrix
from partplan.runtime.steal_solve import solve
from partplan.bench.script import add_json_option, check_json_output, run, write_json
from partplan.jobs.args import positive_int

def gmean(a) -> float:
    a = np.asarray(a, dtype=float)
    return float(np.exp(np.log(a).mean())) if a.size else float("nan")

def part_of(g, p, kind, seed=0):
    if kind == "random":
        return np.random.default_rng(seed).integers(0, p, g.n)
    from partplan.partition.api import partition
    if kind == "metis":
        return partition(g, p, model="graph", backend="metis", seed=seed, stats=False).part
    return partition(g, p, model="hypergraph", objective="total", seed=seed, stats=False, threads=2).part

def engine(g, part, p, sc=None):
    plan = build_plan(g, np.asarray(part, np.int64), p)
    comm = LocalComm(p, plan.groups())
    e = BfsEngine(plan.manifest, plan.ranks, comm, direction="top-down")
    if sc is not None:
        e.balancer = Balancer(comm, e.rgs, g.n, sc)
    return e

def balance(args, graphs, out: list):
    print(f"\n== 1. per-level balance, p = {args.p}, top-down BFS, {args.roots} roots, topology "
          f"{args.topology or 'uniform (local 1, link +1)'}, solver {args.solver}, t1={args.t1} t2={args.t2} "
          f"t4={args.t4}")
    print(f"{'graph':<14}{'partition':<12}{'levels':>7}{'trig':>6}{'gm before':>11}{'gm after':>10}"
          f"{'worst a/b':>10}{'gm bound':>10}{'stolen %':>10}{'steal MB':>10}{'hub MB':>8}  valid")
    keep = {}
    for name, (src, dst, g) in graphs.items():
        val = BfsValidator(src, dst, g.n)
        roots = search_keys(src, dst, g.n, args.roots, seed=1)
        for pk in ("random", "metis", "hypergraph"):
            part = part_of(g, args.p, pk)
            sc = StealConfig(solver=args.solver, t1=args.t1, t2=args.t2, t4=args.t4,
                             costs=cost_matrix(args.topology, args.p))
            e = engine(g, part, args.p, sc)
            lv, ok, edges = [], True, 0
            for r in roots:
                res = e.search(int(r))
                ok &= val.check(int(r), res.parents, levels=res.levels).ok
                lv += [x.to_json() for x in res.records]
                edges += res.edges_examined
                recs = [x.to_json() for x in res.records]
                bm = gmean([x["load_max_over_mean"] for x in recs if x.get("steal_triggered")] or [1.0])
                if len(recs) > 3 and bm > keep.get("best", (0,))[0]:
                    keep["best"] = (bm, name, pk, int(r), recs)
            t = [x for x in lv if x.get("steal_triggered")]
            b, a = [x["load_max_over_mean"] for x in t], [x["load_max_over_mean_after"] for x in t]
            bound = [max(1.0, x.get("load_bound_max_over_mean", 1.0)) for x in t]
            worst = max((y / x for x, y in zip(b, a)), default=float("nan"))
            stolen = sum(x["stolen_edges"] for x in lv)
            steal_mb = sum(x['steal_bytes'] for x in lv) / 1e6
            print(f"{name:<14}{pk:<12}{len(lv):>7}{len(t):>6}{gmean(b):>11.3f}{gmean(a):>10.3f}{worst:>10.3f}"
                  f"{gmean(bound):>10.3f}{100 * stolen / max(edges, 1):>9.1f}%"
                  f"{steal_mb:>10.2f}{e.balancer.hub_cache_bytes / 1e6:>8.2f}  {ok}")
            out.append({"graph": name, "partition": pk, "levels": len(lv), "triggered": len(t),
                        "gmean_before": gmean(b), "gmean_after": gmean(a), "worst_after_over_before": worst,
                        "gmean_bound": gmean(bound), "stolen_share": stolen / max(edges, 1), "steal_mb": steal_mb,
                        "hub_cache_mb": e.balancer.hub_cache_bytes / 1e6, "valid": bool(ok)})
    return keep

def level_loads(g, part, p, roots):
    """Per-level loads l_i (edges frontier -> rank i's vertices) of BFS from ``roots``."""
    import scipy.sparse.csgraph as cg
    A = g.to_scipy().tocsr()
    src = np.repeat(np.arange(g.n), np.diff(A.indptr))
    dst = A.indices
    out = []
    for r in roots:
        d = cg.shortest_path(A, indices=int(r), unweighted=True, method="D")
        lev = np.where(np.isfinite(d), d, -1).astype(np.int64)
        for k in range(int(lev.max()) + 1):
            sel = lev[src] == k
            loads = np.bincount(part[dst[sel]], minlength=p)
            if loads.max() > 0:
                out.append(loads)
    return out

def solver_times(args, g, out: list):
    print("\n== 2. assignment solve time per level (ms, mean over the levels that trigger; R-MAT BFS loads, random 1D "
          "partition, tree:4xP/4 link costs: local 1, +1 in a domain of 4, +10 across)")
    print(f"{'p':>4}{'levels':>8}" + "".join(f"{s + ' ms':>12}" for s in ("cbc", "highs", "lp"))
          + f"{'max MILP/LP-1':>15}{'max lp/LP-1':>13}")
    for p in args.solver_p:
        part = np.random.default_rng(0).integers(0, p, g.n)
        roots = np.random.default_rng(1).choice(np.flatnonzero(np.diff(g.to_scipy().indptr) > 0), 2, replace=False)
        loads = [lo for lo in level_loads(g, part, p, roots)
                 if lo.max() >= args.t1 and lo.max() - lo.min() >= args.t2]  # levels where stealing triggers
        c = cost_matrix(f"tree:4x{max(p // 4, 1)}" if p >= 4 else None, p)
        ms, gap_milp, gap_lp = {}, 0.0, 0.0
        for s in ("cbc", "highs", "lp"):
            t = []
            for lo in loads:
                a = solve(lo, c, s, lp_bound=(s != "lp"), time_limit=5.0)
                t.append(a.solve_s)
                if s != "lp":
                    gap_milp = max(gap_milp, a.z / a.z_lp - 1)
                else:
                    gap_lp = max(gap_lp, a.z / a.z_lp - 1)
            ms[s] = 1e3 * np.mean(t)
        print(f"{p:>4}{len(loads):>8}" + "".join(f"{ms[s]:>12.1f}" for s in ("cbc", "highs", "lp"))
              + f"{gap_milp:>15.2e}{gap_lp:>13.2e}")
        out.append({"p": p, "levels": len(loads), **{f"{s}_ms": ms[s] for s in ms},
                    "max_milp_over_lp_minus_1": gap_milp, "max_lp_over_lp_bound_minus_1": gap_lp})

def osteal(args, out: list):
    from partplan.datasets.generators import grid2d
    g = grid2d(args.strip, 4)
    src, dst = g.rows, g.indices
    p = args.p
    part = (np.arange(g.n) % args.strip) * p // args.strip  # contiguous blocks along the strip
    print(f"\n== 3. OSteal on a {args.strip} x 4 grid strip (n = {g.n:,}, diameter ~{args.strip + 3}), p = {p}, "
          f"block partition, LocalComm, root 0")
    val = BfsValidator(src, dst, g.n)
    print(f"{'mode':<16}{'levels':>7}{'time ms':>9}{'mean active':>13}{'min active':>11}{'stolen edges':>14}  valid")
    for mode in (None, "fsteal", "fsteal+osteal"):
        sc = None if mode is None else StealConfig(mode=mode, solver="lp", t1=args.t1, t2=args.t2, t3=args.t3)
        e = engine(g, part, p, sc)
        e.search(0)  # warm-up
        t0 = time.perf_counter()
        res = e.search(0)
        dt = time.perf_counter() - t0
        lv = [x.to_json() for x in res.records]
        act = np.array([x.get("active_ranks", p) for x in lv])
        stolen, ok = sum(x.get('stolen_edges', 0) for x in lv), val.check(0, res.parents, levels=res.levels).ok
        print(f"{mode or 'none':<16}{len(lv):>7}{1e3 * dt:>9.1f}{act.mean():>13.2f}{act.min():>11}"
              f"{stolen:>14}  {ok}")
        out.append({"mode": mode or "none", "levels": len(lv), "time_ms": 1e3 * dt, "mean_active": float(act.mean()),
                    "min_active": int(act.min()), "stolen_edges": int(stolen), "valid": bool(ok)})
        if mode == "fsteal+osteal":  # active ranks per level, run-length encoded: ranks x levels
            cut = np.flatnonzero(np.diff(act)) + 1
            runs = [f"{int(a[0])}x{a.size}" for a in np.split(act, cut)]
            print("  active ranks per level (ranks x levels): " + " ".join(runs[:40])
                  + (f" ... ({len(runs)} runs)" if len(runs) > 40 else ""))

def gloo(args, out: list):
    print(f"\n== 4. end to end: Graph500 scale {args.scale}, gloo p = 4 processes, {args.roots} roots, "
          f"METIS partition (2 CPU cores shared by 4 processes)")
    print(f"{'direction':<10}{'steal':<16}{'median ms':>10}{'TEPS hmean':>12}{'steal s/search':>15}  valid")
    for direction in ("top-down", "auto"):
        for steal in (None, "fsteal"):
            cfg = {"job": "graph500", "backend": "gloo", "roots": args.roots, "seed": 0, "direction": direction,
                   "graph500": {"scale": args.scale, "edgefactor": 16, "seed": 0, "layout": "1d",
                                "partition": "metis", "nprocs": 4}, "timeout": 300.0}
            if steal:
                cfg["steal"] = {"mode": steal, "solver": args.solver, "t1": args.t1, "t2": args.t2, "t4": args.t4}
            rep = execute_graph500(cfg, nprocs=4, threads=1)
            ss = rep.get("steal", {})
            print(f"{direction:<10}{steal or 'none':<16}{rep['time_median_s'] * 1e3:>10.1f}"
                  f"{rep['teps_harmonic_mean']:>12.4g}{ss.get('solve_s', 0.0) / max(rep['roots'], 1):>15.4f}"
                  f"  {rep['all_valid']}")
            out.append({"direction": direction, "steal": steal or "none", "time_median_s": rep["time_median_s"],
                        "teps_harmonic_mean": rep["teps_harmonic_mean"],
                        "steal_solve_s_per_search": ss.get("solve_s", 0.0) / max(rep["roots"], 1),
                        "valid": bool(rep["all_valid"])})

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--p", type=positive_int, default=4)
    ap.add_argument("--roots", type=positive_int, default=8)
    ap.add_argument("--solver", default="lp")
    ap.add_argument("--topology", default=None, help="link costs (preset / JSON); default uniform")
    ap.add_argument("--t1", type=float, default=1000.0)
    ap.add_argument("--t2", type=float, default=500.0)
    ap.add_argument("--t3", type=float, default=2e-3)
    ap.add_argument("--t4", type=float, default=256.0)
    ap.add_argument("--solver-p", type=positive_int, nargs="+", default=[4, 8, 16, 64])
    ap.add_argument("--strip", type=positive_int, default=4000)
    ap.add_argument("--png", default="steal_balance.png")
    ap.add_argument("--skip-gloo", action="store_true")
    add_json_option(ap)
    args = ap.parse_args()
    check_json_output(args.json)
    res = {"balance": [], "solver_ms": [], "osteal": [], "gloo": []}
    from partplan.datasets import load_graph
    src, dst, g = graph500_graph(args.scale, 16, 0)
    enron = load_graph("email-Enron")
    e_src, e_dst = enron.rows, enron.indices
    graphs = {f"R-MAT {args.scale}": (src, dst, g), "email-Enron": (e_src, e_dst, enron)}
    keep = balance(args, graphs, res["balance"])
    if args.png and keep:
        from partplan.runtime.steal_plot import plot_balance
        _, name, pk, root, lv = keep["best"]
        print(f"\nper level, {name}, {pk} partition, root {root} (the PNG):")
        print(f"{'level':>6}{'stolen':>9}{'before':>9}{'after':>9}{'bound':>9}")
        for k, x in enumerate(lv):
            if x.get("load_max_over_mean") is not None:
                print(f"{k:>6}{x['stolen_edges']:>9}{x['load_max_over_mean']:>9.3f}{x['load_max_over_mean_after']:>9.3f}"
                      f"{x.get('load_bound_max_over_mean', float('nan')):>9.3f}")
        plot_balance({f"fsteal ({args.solver})": lv}, args.png,
                     title=f"{name}, {pk} partition, p = {args.p}, root {root}: max/mean per level")
        print(f"\nwrote {args.png}")
    solver_times(args, g, res["solver_ms"])
    osteal(args, res["osteal"])
    if not args.skip_gloo:
        gloo(args, res["gloo"])
    write_json(args.json, res)

if __name__ == "__main__":
    run(main)
