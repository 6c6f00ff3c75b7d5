"""BFS TEPS on Graph500 Kronecker graphs: partplan's distributed BFS (gloo,
p = 1, 2, 4 processes; every tree validated) beside scipy's single-process
``breadth_first_order`` and NetworKit's ``distance.BFS`` (optional peer:
``pip install networkit``), all measured in this run on the same graph and
roots, with the same TEPS edge count (input tuples in the searched component).
Also: 2D (``2d:RxC``, p = R·C) and routed (``routed:ROUTE:D``, p = the largest
``--p``) rows on gloo, with the messages per search by group family (a routed
plan's ``cross`` family = messages crossing a domain boundary); edges examined
and time of direction-optimizing vs top-down only, 1D and 2D (LocalComm).

    python benchmarks/bench_bfs.py                 # scale 16, 16 roots, p = 1 2 4, 2d:2x2, routed:domain:2
    python benchmarks/bench_bfs.py --scale 16 18 --roots 64 --layouts 2d:2x2 2d:1x2
    python benchmarks/bench_bfs.py --scale 12 --roots 4 --p 1 2 --layouts --json bfs.json
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse.csgraph as cg

from partplan.runtime.graph500 import search_keys, teps_stats, validate_bfs_tree

from partplan.cli._graph500 import execute_graph500, graph500_graph
from partplan.bench.script import add_json_option, check_json_output, run, write_json
from partplan.jobs.args import positive_int

def peer_teps(name, fn, roots, src, dst, n):
    times, edges = [], []
    fn(int(roots[0]))  # warm-up
    for r in roots:
        t0 = time.perf_counter()
        par = fn(int(r))
        times.append(time.perf_counter() - t0)
        if par is not None:
            v = validate_bfs_tree(src, dst, int(r), par, n=n)
            assert v.ok, (name, v.messages)
            edges.append(v.nedge)
    return times, edges

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, nargs="+", default=[16])
    ap.add_argument("--roots", type=positive_int, default=16)
    ap.add_argument("--p", type=positive_int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--partition", default="metis")
    ap.add_argument("--layouts", nargs="*", default=["2d:2x2", "routed:domain:2"],
                    help="more gloo rows: 2d:RxC (p = R*C) or routed:ROUTE:D (p = the largest --p)")
    add_json_option(ap)
    args = ap.parse_args()
    check_json_output(args.json)
    results = []
    for scale in args.scale:
        src, dst, g = graph500_graph(scale, 16, 0)
        roots = search_keys(src, dst, g.n, args.roots, seed=0)
        A = g.to_scipy()
        print(f"\nR-MAT scale {scale}: n={g.n:,} tuples={src.size:,} nnz={g.nnz:,}; {roots.size} roots")

        def scipy_bfs(r):
            order, pred = cg.breadth_first_order(A, r, directed=True, return_predecessors=True)
            pred = pred.astype(np.int64)
            pred[pred < 0] = -1
            pred[r] = r
            return pred
        t_sp, e_sp = peer_teps("scipy", scipy_bfs, roots, src, dst, g.n)
        rows = [("scipy breadth_first_order (1 proc)", teps_stats(e_sp, t_sp))]
        try:
            import networkit as nk
            G = nk.GraphFromCoo((np.ones(g.nnz), (g.rows, g.indices)), n=g.n, directed=True)
            nk.setNumberOfThreads(1)

            def nk_bfs(r):
                nk.distance.BFS(G, r, storePaths=False).run()
            t_nk, _ = peer_teps("networkit", nk_bfs, roots, src, dst, g.n)
            rows.append(("networkit distance.BFS (1 thread)", teps_stats(e_sp, t_nk)))
        except ImportError:
            print("networkit not installed (pip install networkit): its row is skipped")
        runs = [(p, "1d") for p in args.p] + [(_ranks(lay, max(args.p)), lay) for lay in args.layouts]
        for p, lay in runs:
            cfg = {"job": "graph500", "backend": "gloo", "roots": int(roots.size), "seed": 0,
                   "graph500": {"scale": scale, "edgefactor": 16, "seed": 0, "nprocs": p, "layout": lay,
                                "partition": "block" if p == 1 else args.partition}, "timeout": 300.0}
            rep = execute_graph500(cfg, nprocs=p)
            assert rep["all_valid"] and rep["bytes_match"] and rep["chosen_mode_le_other"]
            rows.append((f"partplan gloo p={p} {lay} ({rep['direction']})", rep))
        ref = rows[0][1]["teps_harmonic_mean"]
        print(f"{'BFS':<42} {'TEPS (harm. mean)':>18} {'Norris std':>11} {'median ms':>10} {'x scipy':>8}  "
              f"messages per search by family")
        for name, st in rows:
            fam = st.get("messages_by_family")
            fam = "" if not fam else ", ".join(f"{f} {v / st['roots']:.0f}" for f, v in fam.items())
            print(f"{name:<42} {st['teps_harmonic_mean']:>18.4g} {st['teps_harmonic_stddev']:>11.3g} "
                  f"{st['time_median_s'] * 1e3:>10.3f} {st['teps_harmonic_mean'] / ref:>8.3f}  {fam}")
        entry = {"scale": scale, "n": g.n, "nnz": g.nnz, "roots": int(roots.size),
                 "rows": [{"bfs": name, "teps_harmonic_mean": st["teps_harmonic_mean"],
                           "teps_harmonic_stddev": st["teps_harmonic_stddev"], "time_median_s": st["time_median_s"],
                           "x_scipy": st["teps_harmonic_mean"] / ref,
                           "messages_by_family": st.get("messages_by_family")} for name, st in rows]}
        results.append(entry)
        entry["crossing"] = crossing(g, roots, max(args.p), args.partition)
        # direction optimization (LocalComm): work and time, 1D on one rank and 2D 2x2
        for lay, p in (("1d", 1), ("2d:2x2", 4)):
            res = {}
            for d in ("top-down", "auto"):
                cfg = {"job": "graph500", "backend": "local", "roots": int(roots.size), "seed": 0, "direction": d,
                       "graph500": {"scale": scale, "edgefactor": 16, "seed": 0, "nprocs": p, "layout": lay,
                                    "partition": "block"}}
                res[d] = execute_graph500(cfg)
                assert res[d]["all_valid"]
            e = res["auto"]["edges_examined_total"] / res["top-down"]["edges_examined_total"]
            t = res["auto"]["time_median_s"] / res["top-down"]["time_median_s"]
            print(f"direction-optimizing vs top-down only ({lay}, p={p}, LocalComm): edges examined x{e:.3f}, "
                  f"median time x{t:.3f}")
            entry.setdefault("direction_optimizing", []).append({"layout": lay, "p": p, "edges_examined_x": e,
                                                                 "median_time_x": t})
    write_json(args.json, {"results": results})

def crossing(g, roots, p: int, partition: str, D: int = 2) -> dict | None:
    """Messages crossing a domain boundary (domains of D ranks) per search, flat 1D vs
    routed, counted from LocalComm's byte counters (a nonzero q → r entry of one
    all-to-all-v with q // D != r // D is one crossing message), same partition."""
    if p <= D:
        return None
    from partplan.runtime.bfs import BfsEngine
    from partplan.runtime.comm import LocalComm
    from partplan.plan import build_plan
    from partplan.cli._graph500 import graph500_plan
    dom = np.arange(p) // D
    inter = dom[:, None] != dom[None, :]
    part = graph500_plan(g, p, "1d", partition).part
    out = []
    for lay in ("1d", f"routed:domain:{D}", f"routed:source:{D}"):
        plan = build_plan(g, part, p, layout=lay, f=1, dtype="float64")
        comm = LocalComm(p, plan.groups())
        count = [0, 0]
        a2a = comm.alltoallv

        def counted(*a, _a2a=a2a, **k):
            before = comm.sent_bytes.copy()
            _a2a(*a, **k)
            sent = (comm.sent_bytes - before) > 0
            count[0] += int(np.count_nonzero(sent & inter))
            count[1] += int(np.count_nonzero(sent))
        comm.alltoallv = counted
        eng = BfsEngine(plan.manifest, plan.ranks, comm)
        for r in roots:
            eng.search(int(r))
        out.append((lay, count[0] / roots.size, count[1] / roots.size))
    print(f"messages per search, p={p}, domains of {D} (LocalComm counters, auto): "
          + "; ".join(f"{lay} {c:.1f} crossing / {a:.1f} all" for lay, c, a in out))
    return {"p": p, "domain_ranks": D, "per_search": [{"layout": lay, "crossing": c, "all": a} for lay, c, a in out]}

def _ranks(layout: str, p_max: int) -> int:
    """Processes of a --layouts entry: R*C for 2d:RxC, else the largest --p."""
    if layout.startswith("2d:"):
        r, c = layout[3:].split("x")
        return int(r) * int(c)
    return p_max

if __name__ == "__main__":
    run(main)
