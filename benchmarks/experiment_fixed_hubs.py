"""Experiment (issue 12, not in the planner): spread the hubs before
partitioning. Mt-KaHyPar with the vertices of degree > factor · TV/k (TV of a
plain Mt-KaHyPar run, at most k of them) fixed to distinct parts, then
bottleneck refinement, against plain Mt-KaHyPar + refinement.

    python benchmarks/experiment_fixed_hubs.py as-22july06,email-Enron 1.0
"""
import sys, time, numpy as np
sys.path.insert(0, "/work/main")
from partplan import datasets, analyze
from partplan.models import column_net
from partplan.partition.backends import mtk_context, mtk_hypergraph, mtkahypar_hypergraph
from partplan.partition.refine import refine
import mtkahypar

def fixed_mtk(hg, k, fixed, seed=0):
    mtk, ctx = mtk_context(k, 0.03, "DEFAULT", "km1", 1)
    mtkahypar.set_seed(seed)
    h = mtk_hypergraph(mtk, ctx, hg, "arrays")
    h.add_fixed_vertices(fixed.tolist(), k)
    phg = h.partition(ctx)
    return np.asarray(phg.get_partition(), dtype=np.int64)

def mx(g, p, k):
    s = analyze(g, p, k, backward=False)
    return max(s.max_send, s.max_recv), s.total_volume

for name, k in [(a, b) for a in sys.argv[1].split(",") for b in (16, 64)]:
    g = datasets.load_graph(name, fetch=True)
    hg = column_net(g)
    t = time.perf_counter(); p0, _ = mtkahypar_hypergraph(hg, k, seed=0); t0 = time.perf_counter() - t
    m0, tv0 = mx(g, p0, k)
    r0, _ = refine(g, p0, k)
    m1, tv1 = mx(g, r0, k)
    deg = np.diff(g.indptr)
    # hubs: degree above the mean per-part volume floor TV/k of the plain partition
    thr = tv0 / k
    hubs = np.argsort(-deg)[: k]
    hubs = hubs[deg[hubs] > float(sys.argv[2]) * thr]
    fixed = np.full(g.n, -1, np.int64); fixed[hubs] = np.arange(hubs.size)
    t = time.perf_counter(); p2 = fixed_mtk(hg, k, fixed); t2 = time.perf_counter() - t
    m2, tv2 = mx(g, p2, k)
    r2, _ = refine(g, p2, k, volume_tolerance=max(0.0, 1.05 * tv0 / tv2 - 1))
    m3, tv3 = mx(g, r2, k)
    print(f"{name:14s} k={k:3d} hubs={hubs.size:3d} plain max {m0} refined {m1/m0:.3f} (tv {tv1/tv0:.3f}) | "
          f"fixed-hubs max {m2/m0:.3f} tv {tv2/tv0:.3f}, refined {m3/m0:.3f} tv {tv3/tv0:.3f}  t {t0:.1f}/{t2:.1f}s", flush=True)
