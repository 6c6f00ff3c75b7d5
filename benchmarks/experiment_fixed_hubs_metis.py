"""Experiment (issue 12, not in the planner): hubs detected up front with
METIS's volume as the TV/k estimate (degree > TV_METIS/k), fixed to distinct
parts in Mt-KaHyPar, then bottleneck refinement (its usual 5 % of its own
input), against plain Mt-KaHyPar + refinement; two seeds per instance, on the
instances of the benchmark set where >= 2 such hubs exist.

    python benchmarks/experiment_fixed_hubs_metis.py
"""
import sys, time, numpy as np
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/work/main/benchmarks")
from partplan import analyze
from partplan.models import column_net
from partplan.partition.backends import metis, mtkahypar_hypergraph, mtk_context, mtk_hypergraph
from partplan.partition.refine import refine
from bench_refine import load_instance
import mtkahypar

def fixed_mtk(hg, k, fixed, seed=0):
    mtk, ctx = mtk_context(k, 0.03, "DEFAULT", "km1", 1)
    mtkahypar.set_seed(seed)
    h = mtk_hypergraph(mtk, ctx, hg, "arrays")
    h.add_fixed_vertices(fixed.tolist(), k)
    return np.asarray(h.partition(ctx).get_partition(), dtype=np.int64)

def mx(g, p, k):
    s = analyze(g, p, k, backward=False)
    return max(s.max_send, s.max_recv), s.total_volume

for name, k in (("email-Enron", 64), ("as-22july06", 16), ("as-22july06", 64)):
    g = load_instance(name); hg = column_net(g); deg = np.diff(g.indptr)
    for rep in range(2):
        t = time.perf_counter(); p0, _ = mtkahypar_hypergraph(hg, k, seed=rep); t_m = time.perf_counter() - t
        m0, tv0 = mx(g, p0, k)
        t = time.perf_counter(); r0, _ = refine(g, p0, k, seed=rep); t_r = time.perf_counter() - t
        m1, tv1 = mx(g, r0, k)
        t = time.perf_counter()
        pm = metis(g, k, seed=rep); tvk = analyze(g, pm, k, backward=False).total_volume / k
        hubs = np.argsort(-deg)[:k]; hubs = hubs[deg[hubs] > tvk]
        fixed = np.full(g.n, -1, np.int64); fixed[hubs] = np.arange(hubs.size)
        p2 = fixed_mtk(hg, k, fixed, seed=rep); t_f = time.perf_counter() - t
        t = time.perf_counter(); r2, _ = refine(g, p2, k, seed=rep); t_r2 = time.perf_counter() - t
        m3, tv3 = mx(g, r2, k)
        s = analyze(g, r2, k, backward=False); imb = s.compute_load.max() / s.compute_load.mean() - 1
        print(f"{name:12s} k={k:3d} hubs={hubs.size:2d} plain max {m0:5d}: refined {m1/m0:.3f} tv {tv1/tv0:.3f} time {(t_m+t_r)/t_m:.2f} | "
              f"hubs-fixed+refine {m3/m0:.3f} tv {tv3/tv0:.3f} time {(t_f+t_r2)/t_m:.2f} imb {imb:.3f}", flush=True)
