"""BFS TEPS on Graph500 Kronecker graphs: partplan's distributed BFS (gloo,
p = 1, 2, 4 processes; every tree validated) beside scipy's single-process
``breadth_first_order`` and NetworKit's ``distance.BFS`` (optional peer:
``pip install networkit``), all measured in this run on the same graph and
roots, with the same TEPS edge count (input tuples in the searched component).
Also: edges examined and time of direction-optimizing vs top-down only.

    python benchmarks/bench_bfs.py                 # scale 16, 16 roots, p = 1 2 4
    python benchmarks/bench_bfs.py --scale 16 18 --roots 64
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse.csgraph as cg

from partplan.runtime.graph500 import search_keys, teps_stats, validate_bfs_tree
from partplan.runtime.graphjobs import graph500_graph, run_graph_job


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
    ap.add_argument("--roots", type=int, default=16)
    ap.add_argument("--p", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--partition", default="metis")
    args = ap.parse_args()
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
        for p in args.p:
            cfg = {"job": "graph500", "backend": "gloo", "roots": int(roots.size), "seed": 0,
                   "graph500": {"scale": scale, "edgefactor": 16, "seed": 0, "nprocs": p, "layout": "1d",
                                "partition": "block" if p == 1 else args.partition}, "timeout": 120.0}
            rep = run_graph_job(cfg, nprocs=p)
            assert rep["all_valid"] and rep["bytes_match"]
            rows.append((f"partplan bfs gloo p={p} ({rep['direction']})", rep))
        ref = rows[0][1]["teps_harmonic_mean"]
        print(f"{'BFS':<40} {'TEPS (harm. mean)':>18} {'Norris std':>11} {'median ms':>10} {'x scipy':>8}")
        for name, st in rows:
            print(f"{name:<40} {st['teps_harmonic_mean']:>18.4g} {st['teps_harmonic_stddev']:>11.3g} "
                  f"{st['time_median_s'] * 1e3:>10.3f} {st['teps_harmonic_mean'] / ref:>8.3f}")
        # direction optimization on one process (LocalComm): work and time
        res = {}
        for d in ("top-down", "auto"):
            cfg = {"job": "graph500", "backend": "local", "roots": int(roots.size), "seed": 0, "direction": d,
                   "graph500": {"scale": scale, "edgefactor": 16, "seed": 0, "nprocs": 1, "partition": "block"}}
            res[d] = run_graph_job(cfg)
        e = res["auto"]["edges_examined_total"] / res["top-down"]["edges_examined_total"]
        t = res["auto"]["time_median_s"] / res["top-down"]["time_median_s"]
        print(f"direction-optimizing vs top-down only (p=1): edges examined x{e:.3f}, median time x{t:.3f}")


if __name__ == "__main__":
    main()
