"""Throughput of label propagation and connected components at p = 1 beside
NetworKit (optional peer: ``pip install partplan[bench]`` or ``pip install
networkit``), measured in this run on the same graphs, one thread each; and
pointer-jumping vs propagating WCC (rounds, wall time) on the same graphs.

* LP: partplan ``lp_parts`` (synchronous, ``--iterations`` sweeps unless it
  converges first) vs NetworKit's ``PLP`` (asynchronous; it stops when few
  labels change) — edges/s per iteration = nnz / (wall time / iterations), nnz
  = stored entries of the symmetric matrix (2 per undirected edge) for both.
* CC: partplan ``wcc_parts`` (propagate) and ``wcc_pointer_jump_parts`` vs
  NetworKit's ``ConnectedComponents`` (one BFS sweep) — edges/s = nnz / wall
  time of the whole run.
* Matching: partplan ``matching_parts`` vs NetworKit's ``SuitorMatcher``
  (the suitor algorithm: the same greedy ½-approximation), wall time and size.

Each figure is the median of ``--repeat`` runs after one warm-up; ratios are
partplan / NetworKit (>1: partplan faster), from this run only.

    python benchmarks/bench_community.py                      # rmat15, delaunay_n15, grid 192x192
    python benchmarks/bench_community.py --scale 16 --grid 256 --iterations 10 --json out.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def median_time(fn, repeat: int):
    fn()
    ts, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), out


def graphs(args):
    import partplan
    from partplan.datasets.generators import grid2d, rmat
    out = {f"rmat{args.scale}": rmat(args.scale, seed=1).normalize(symmetrize=True, self_loops="remove")}
    try:
        out["delaunay_n15"] = partplan.datasets.load("delaunay_n15").normalize(symmetrize=True, self_loops="remove")
    except Exception as exc:  # noqa: BLE001 - a dataset that cannot be loaded here is reported and skipped
        print(f"delaunay_n15 skipped: {exc}")
    out[f"grid{args.grid}"] = grid2d(args.grid, args.grid)
    return out


def to_networkit(g):
    import networkit as nk
    A = g.to_scipy().tocoo()
    keep = A.row < A.col
    G = nk.Graph(g.n, weighted=False, directed=False)
    G.addEdges((A.row[keep].astype(np.uint64), A.col[keep].astype(np.uint64)))
    return G


def bench_graph(name, g, args):
    from partplan.plan import build_plan
    from partplan.runtime.analytics import wcc_parts
    from partplan.runtime.comm import LocalComm
    from partplan.runtime.lp import lp_parts
    from partplan.runtime.matching import matching_parts
    from partplan.runtime.neighbours import with_world
    from partplan.runtime.pointer_jump import wcc_pointer_jump_parts
    plan = build_plan(g, np.zeros(g.n, dtype=np.int64), 1)
    m, ranks = plan.manifest, plan.ranks
    nnz = int(g.to_scipy().nnz)

    def comm():
        return LocalComm(1, with_world(plan.groups(), 1))
    row = {"graph": name, "n": g.n, "nnz": nnz}
    t, (_, _, rec) = median_time(lambda: lp_parts(m, ranks, comm(), iterations=args.iterations,
                                                  kernels=args.kernels), args.repeat)
    row["lp_iterations"], row["lp_s"] = len(rec), t
    row["lp_edges_per_s"] = nnz * len(rec) / t
    t, (_, lab, rec) = median_time(lambda: wcc_parts(m, ranks, comm(), kernels=args.kernels), args.repeat)
    row.update(wcc_propagate_s=t, wcc_propagate_rounds=len(rec), wcc_propagate_edges_per_s=nnz / t)
    ref = lab[0]
    t, (_, lab, rec) = median_time(lambda: wcc_pointer_jump_parts(m, ranks, comm(), kernels=args.kernels),
                                   args.repeat)
    assert np.array_equal(lab[0], ref), "pointer jumping and propagation disagree"
    row.update(wcc_pointer_jump_s=t, wcc_pointer_jump_rounds=len(rec), wcc_pointer_jump_edges_per_s=nnz / t)
    row["components"] = int(np.unique(ref).size)
    t, (_, _, weight, rec) = median_time(lambda: matching_parts(m, ranks, comm(), kernels=args.kernels), args.repeat)
    row.update(matching_s=t, matching_rounds=len(rec), matching_weight=weight)
    try:
        import networkit as nk
    except ImportError:
        row["networkit"] = "not installed (pip install networkit)"
        return row
    nk.setNumberOfThreads(1)
    G = to_networkit(g)

    def plp():
        a = nk.community.PLP(G, maxIterations=args.iterations)
        a.run()
        return a.numberOfIterations()
    t, iters = median_time(plp, args.repeat)
    row.update(nk_plp_s=t, nk_plp_iterations=int(iters), nk_plp_edges_per_s=nnz * max(int(iters), 1) / t)

    def cc():
        a = nk.components.ConnectedComponents(G)
        a.run()
        return a.numberOfComponents()
    t, ncomp = median_time(cc, args.repeat)
    row.update(nk_cc_s=t, nk_cc_edges_per_s=nnz / t, nk_components=int(ncomp))

    def lm():
        a = nk.matching.SuitorMatcher(G)
        a.run()
        return a.getMatching().size(G)
    t, size = median_time(lm, args.repeat)
    row.update(nk_matching_s=t, nk_matching_size=int(size))
    row["ratio_lp_per_iteration"] = row["lp_edges_per_s"] / row["nk_plp_edges_per_s"]
    row["ratio_cc_propagate"] = row["nk_cc_s"] / row["wcc_propagate_s"]
    row["ratio_cc_pointer_jump"] = row["nk_cc_s"] / row["wcc_pointer_jump_s"]
    row["ratio_matching"] = row["nk_matching_s"] / row["matching_s"]
    return row


def render(rows) -> str:
    out = [("graph           n        nnz   LP it  LP Medge/s  NK PLP it  NK Medge/s  ratio | CC prop s (rounds)"
            "  CC PJ s (rounds)  NK CC s  ratio prop/PJ | match s  NK match s  ratio")]
    for r in rows:
        nk = "nk_plp_s" in r

        def f(k, fmt, r=r):
            return format(r[k], fmt) if k in r else "-"
        out.append(
            f"{r['graph']:<12} {r['n']:>7,} {r['nnz']:>10,} {r['lp_iterations']:>6} {r['lp_edges_per_s'] / 1e6:>11.2f}"
            f" {f('nk_plp_iterations', 'd'):>10} {(r['nk_plp_edges_per_s'] / 1e6 if nk else 0):>11.2f}"
            f" {f('ratio_lp_per_iteration', '.3f'):>6} | {r['wcc_propagate_s']:>9.4f} ({r['wcc_propagate_rounds']:>4})"
            f" {r['wcc_pointer_jump_s']:>9.4f} ({r['wcc_pointer_jump_rounds']:>3}) {f('nk_cc_s', '.4f'):>8}"
            f" {f('ratio_cc_propagate', '.3f')}/{f('ratio_cc_pointer_jump', '.3f')}"
            f" | {r['matching_s']:>7.4f} {f('nk_matching_s', '.4f'):>11} {f('ratio_matching', '.3f'):>6}")
    out.append("ratios: NetworKit time / partplan time at equal work (>1: partplan faster); one thread each, p = 1")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=15, help="R-MAT scale (default 15)")
    ap.add_argument("--grid", type=int, default=192, help="side of the 2D grid (default 192: diameter 382)")
    ap.add_argument("--iterations", type=positive_int, default=10, help="LP iteration limit of both (default 10)")
    ap.add_argument("--repeat", type=positive_int, default=3, help="timed runs per figure (median; default 3)")
    ap.add_argument("--kernels", default="native", choices=("native", "torch"), help="partplan's kernels")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    rows = [bench_graph(name, g, args) for name, g in graphs(args).items()]
    print(render(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    run(main)
