"""Benchmark of bottleneck refinement, the fast mode and decoupled ownership.

Starts from Mt-KaHyPar DEFAULT partitions of the column-net hypergraph and
reports, per instance and k: max(send, recv) after/before refinement, total
volume after/before, compute imbalance, refinement seconds / Mt-KaHyPar
seconds, and for decoupled ownership the max(send, recv) over the LP lower
bound. Run ``python benchmarks/bench_refine.py --help``; importable as
:func:`run_benchmark` (used by ``partplan bench``).

Timings are wall-clock on whatever machine runs it (single-threaded
Mt-KaHyPar unless ``--threads``); they are noisy on shared machines.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from partplan.graph import Graph
from partplan.partition.options import DEFAULT_IMBALANCE
from partplan.bench.script import run
from partplan.jobs.args import positive_int


# ----------------------------------------------------------------- generators
def rmat_graph(scale: int, edge_factor: int = 16, *, a=0.57, b=0.19, c=0.19, seed: int = 0) -> Graph:
    """Graph500-style R-MAT (2^scale vertices, edge_factor·2^scale edges),
    symmetrized, without self loops, duplicates or isolated vertices."""
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for _ in range(scale):
        r = rng.random(m)
        down = r >= a + b                       # quadrants c or d: src bit 1
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)
        src = 2 * src + down
        dst = 2 * dst + right
    perm = rng.permutation(1 << scale)
    return Graph.from_edges(perm[src], perm[dst], n=1 << scale, symmetrize=True, self_loops="remove",
                            drop_isolated=True, name=f"rmat{scale}")


def geometric_graph(n: int, knn: int = 9, extra: float = 0.01, *, seed: int = 0) -> Graph:
    """The notes' G1: n uniform points in the unit square, knn nearest
    neighbours, plus ``extra``·nnz random entries, randomly relabelled, symmetrized."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    _, nb = cKDTree(pts).query(pts, knn + 1)
    src = np.repeat(np.arange(n), knn)
    dst = nb[:, 1:].ravel()
    r = int(extra * src.size)
    src = np.concatenate([src, rng.integers(0, n, r)])
    dst = np.concatenate([dst, rng.integers(0, n, r)])
    perm = rng.permutation(n)
    return Graph.from_edges(perm[src], perm[dst], n=n, symmetrize=True, self_loops="remove",
                            name=f"geo{n}")


def hub_recv_bound(graph: Graph, cap: int, top: int = 200) -> int:
    """A lower bound on max recv valid for every partition whose part weights
    (row nnz, at least 1) stay ≤ ``cap``: the part holding row v receives every
    column of row v it does not hold, and it can hold at most the lightest
    neighbours of v that fit beside v. Evaluated for the ``top`` densest rows."""
    w = np.maximum(graph.row_nnz, 1)
    best = 0
    for v in np.argsort(-graph.row_nnz, kind="stable")[:top].tolist():
        cols = graph.indices[graph.indptr[v]:graph.indptr[v + 1]]
        cols = cols[cols != v]
        fit = int(np.searchsorted(np.cumsum(np.sort(w[cols])), cap - w[v], side="right"))
        best = max(best, cols.size - fit)
    return best


# ----------------------------------------------------------------- instances
SYNTHETIC = {"rmat14": lambda: rmat_graph(14), "rmat15": lambda: rmat_graph(15),
             "rmat16": lambda: rmat_graph(16), "geo32k": lambda: geometric_graph(32768)}
REAL = ("email-Enron", "as-22july06", "astro-ph", "cond-mat-2003", "copter2", "mdual",
        "delaunay_n15", "rgg_n_2_15_s0")
# the benchmark set: the fetchable real graphs and R-MAT 16 (k = 16, 64)
DEFAULT_INSTANCES = ("email-Enron", "as-22july06", "astro-ph", "cond-mat-2003", "copter2", "rmat16")


def load_instance(name: str, fetch: bool = False) -> Graph | None:
    """A synthetic generator above or a registered dataset (None when unavailable)."""
    if name in SYNTHETIC:
        return SYNTHETIC[name]()
    from partplan.errors import PartplanError

    try:
        from partplan.datasets import load
        g = load(name, fetch=fetch)
    except (ImportError, PartplanError) as exc:
        print(f"# skipping {name}: {exc}", file=sys.stderr)
        return None
    if not isinstance(g, Graph):
        print(f"# skipping {name}: not a graph", file=sys.stderr)
        return None
    if not g.is_symmetric():
        g = g.normalize(symmetrize=True)
    return g


def run_one(g: Graph, k: int, *, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE, threads: int = 1,
            volume_tolerance: float = 0.05, time_limit: float | None = None, decoupled: bool = True,
            lp_solver: str = "highs") -> dict:
    """One row of the table: Mt-KaHyPar DEFAULT, then what ``partition(objective="max-both")`` runs
    after it (hubs apart, :mod:`partplan.partition.refinement.hubs`; bottleneck refinement), then decoupled owners.
    The ratios compare with the plain Mt-KaHyPar partition; the column-net model is built once, outside
    the timings (the planner builds it once for both)."""
    from partplan.models import column_net
    from partplan.partition.engines import mtkahypar_hypergraph
    from partplan.partition.refinement.hubs import spread_hubs
    from partplan.partition.refinement.ownership import assign_owners, owner_lower_bound
    from partplan.partition.refinement.refine import refine

    hg = column_net(g)
    t0 = time.perf_counter()
    part, _ = mtkahypar_hypergraph(hg, k, imbalance=imbalance, seed=seed, preset="DEFAULT", threads=threads)
    t_mtk = time.perf_counter() - t0
    t0 = time.perf_counter()
    start, hrep = spread_hubs(g, hg, part, k, imbalance=imbalance, seed=seed, volume_tolerance=volume_tolerance,
                              threads=threads)
    t_hubs = time.perf_counter() - t0
    new, rep = refine(g, start, k, objective="max-both", imbalance=imbalance,
                      volume_tolerance=volume_tolerance, seed=seed, time_limit=time_limit,
                      volume_reference=hrep["before"]["total_volume"] if hrep["kept"] else None)
    if hrep["kept"]:      # the ratios are against the plain partition
        rep["before"] = refine(g, part, k, max_passes=0)[1]["before"]
    rep["seconds"] += t_hubs
    b, a = rep["before"], rep["after"]
    hub = hub_recv_bound(g, rep["balance_cap"])
    row = {"graph": g.name, "n": g.n, "nnz": g.nnz, "k": k,
           "max_before": b["max_send_recv"], "max_after": a["max_send_recv"],
           "max_ratio": a["max_send_recv"] / max(b["max_send_recv"], 1),
           "tv_before": b["total_volume"], "tv_after": a["total_volume"],
           "tv_ratio": a["total_volume"] / max(b["total_volume"], 1),
           "mean_over_max_before": b["total_volume"] / k / max(b["max_send_recv"], 1),
           "hub_bound": hub, "hub_bound_over_max_before": hub / max(b["max_send_recv"], 1),
           "max_after_over_hub_bound": a["max_send_recv"] / hub if hub else float("nan"),
           "imbalance_before": b["compute_imbalance"], "imbalance_after": a["compute_imbalance"],
           "balance_ok": a["max_balance_weight"] <= rep["balance_cap"],
           "mtk_s": t_mtk, "refine_s": rep["seconds"], "time_ratio": rep["seconds"] / max(t_mtk, 1e-9),
           "total_time_ratio": (t_mtk + rep["seconds"]) / max(t_mtk, 1e-9),
           "converged_s": rep["converged_s"], "stopped": rep["stopped"], "hubs_s": t_hubs,
           "hubs_spread": hrep["hubs"] if hrep["kept"] else 0,
           "cluster_moves": (rep["multilevel"] or {}).get("moves", 0),
           "passes": rep["passes"], "moves": rep["moves"]}
    if decoupled:
        t0 = time.perf_counter()
        bound = owner_lower_bound(g, part, k, objective="max-both")
        t_b = time.perf_counter() - t0
        _, gi = assign_owners(g, part, k, method="greedy", objective="max-both", return_info=True)
        _, li = assign_owners(g, part, k, method="lp", objective="max-both", solver=lp_solver,
                              return_info=True)
        row.update(dec_bound=bound, dec_greedy=gi["max_send_recv"], dec_lp=li["max_send_recv"],
                   dec_lp_over_bound=li["max_send_recv"] / max(bound, 1),
                   dec_greedy_over_bound=gi["max_send_recv"] / max(bound, 1),
                   # the exchange can be smaller than conformal (ownership.py: a column no row of
                   # its own part reads need not come back to it), never larger
                   dec_tv_not_above=li["total_volume"] <= b["total_volume"],
                   dec_bound_s=t_b, dec_greedy_s=gi["seconds"], dec_lp_s=li["seconds"])
    return row


def gmean(x) -> float:
    x = [v for v in x if v > 0]
    return float(math.exp(sum(math.log(v) for v in x) / len(x))) if x else float("nan")


COLUMNS = [("graph", "{:<14}"), ("k", "{:>3}"), ("max_ratio", "{:>6.3f}"), ("tv_ratio", "{:>6.3f}"),
           ("mean_over_max_before", "{:>6.3f}"), ("hub_bound_over_max_before", "{:>6.3f}"),
           ("max_after_over_hub_bound", "{:>6.2f}"),
           ("imbalance_after", "{:>6.4f}"), ("mtk_s", "{:>7.2f}"), ("refine_s", "{:>7.2f}"),
           ("total_time_ratio", "{:>6.3f}"), ("passes", "{:>4d}"), ("dec_lp_over_bound", "{:>6.4f}"),
           ("dec_greedy_over_bound", "{:>6.4f}")]
HEADERS = ["graph", "k", "max r", "TV r", "mean/mx", "hub/mx", "mx/hub", "imb", "mtk s", "ref s", "(m+r)/m",
           "passes", "LP/bnd", "gr/bnd"]


def format_table(rows: list[dict]) -> str:
    out = ["  ".join(f"{h:>7}" if i else f"{h:<14}" for i, h in enumerate(HEADERS))]
    for r in rows:
        out.append("  ".join((fmt.format(r[c]) if c in r else "      -").rjust(7) if i else fmt.format(r[c])
                             for i, (c, fmt) in enumerate(COLUMNS)))
    if rows:
        gm = {c: gmean([r[c] for r in rows if c in r]) for c in
              ("max_ratio", "tv_ratio", "mean_over_max_before", "hub_bound_over_max_before", "time_ratio",
               "total_time_ratio", "dec_lp_over_bound", "dec_greedy_over_bound")}
        out.append("geomean: max(send,recv) after/before {max_ratio:.3f} (target <= 0.75; mean/max "
                   "{mean_over_max_before:.3f}, hub bound/max {hub_bound_over_max_before:.3f}), total "
                   "volume {tv_ratio:.3f}, (Mt-KaHyPar + refine)/Mt-KaHyPar time {total_time_ratio:.3f} "
                   "(target <= 1.2; refine/mtk {time_ratio:.3f}), decoupled "
                   "LP/bound {dec_lp_over_bound:.4f}, greedy/bound {dec_greedy_over_bound:.4f}".format(**gm))
        out.append(f"total volume after/before <= 1.05 in {sum(r['tv_ratio'] <= 1.05 for r in rows)}/{len(rows)} "
                   f"runs (max {max(r['tv_ratio'] for r in rows):.4f}); balance cap (eps, or the input's "
                   f"heaviest part) kept in {sum(r['balance_ok'] for r in rows)}/{len(rows)} runs; max compute "
                   f"imbalance after {max(r['imbalance_after'] for r in rows):.4f}")
        hubs = [r for r in rows if r.get("hub_bound_over_max_before", 0) >= 0.25]
        for r in hubs:
            out.append(f"hub bound {r['graph']} k={r['k']}: bound {r['hub_bound']} rows, max(send,recv) "
                       f"{r['max_before']} -> {r['max_after']} ({r['max_after_over_hub_bound']:.3f}x the bound)")
    return "\n".join(out)


def warm_up() -> float:
    """Compile (or load from numba's cache) the refinement kernels once, so
    that the timed runs do not include it; returns the seconds it took."""
    from partplan.partition.refinement.refine import refine

    t0 = time.perf_counter()
    g = rmat_graph(7)
    part = np.arange(g.n) % 4
    for obj in ("max-both", "total"):
        refine(g, part, 4, objective=obj)
    return time.perf_counter() - t0


def run_fast(g: Graph, k: int, *, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE, repeat: int = 3, **opts) -> dict:
    """Fast mode : METIS, then the km1 V-cycle refinement
    (:func:`partplan.partition.refinement.vcycle.vcycle_refine`, what ``preset="fast"``
    runs), against METIS alone. Each is run ``repeat`` times; the minimum
    wall and the minimum CPU (process) seconds are kept — both runs are
    single-threaded, and on a shared machine CPU seconds are the stabler
    figure. Volumes are recounted by :func:`partplan.analyze`."""
    from partplan import analyze
    from partplan.partition.engines import metis
    from partplan.partition.context import VCycleContext, resolve
    from partplan.partition.refinement.vcycle import vcycle_refine

    mw = mc = rw = rc = math.inf
    for _ in range(max(1, repeat)):
        t0, c0 = time.perf_counter(), time.process_time()
        part = metis(g, k, imbalance=imbalance, seed=seed)
        t1, c1 = time.perf_counter(), time.process_time()
        new, rep = vcycle_refine(g, part, k, imbalance=imbalance, seed=seed,
                                 context=resolve(VCycleContext, opts, label="vcycle"))
        t2, c2 = time.perf_counter(), time.process_time()
        mw, mc, rw, rc = min(mw, t1 - t0), min(mc, c1 - c0), min(rw, t2 - t1), min(rc, c2 - c1)
    before, after = analyze(g, part, k).total_volume, analyze(g, new, k).total_volume
    if (before, after) != (rep["before"]["total_volume"], rep["after"]["total_volume"]):
        raise RuntimeError(f"{g.name} k={k}: the refinement's km1 differs from analyze's total volume")
    w = np.maximum(g.row_nnz, 1)
    loads = np.bincount(new, weights=g.row_nnz, minlength=k)
    return {"graph": g.name, "k": k, "metis_tv": before, "fast_tv": after, "tv_ratio": after / max(before, 1),
            "metis_s": mw, "refine_s": rw, "time_ratio": (mw + rw) / max(mw, 1e-9),
            "metis_cpu_s": mc, "refine_cpu_s": rc, "cpu_ratio": (mc + rc) / max(mc, 1e-9),
            "imbalance_after": float(loads.max() / loads.mean() - 1.0),
            "balance_ok": bool(np.bincount(new, weights=w, minlength=k).max() <= rep["balance_cap"]),
            "levels": len(rep["cycles"][0]["levels"]) if rep["cycles"] else 0,
            "band": rep["cycles"][0]["band"] if rep["cycles"] else None}


def run_fast_benchmark(instances=DEFAULT_INSTANCES, ks=(16, 64), *, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE,
                       fetch: bool = False, verbose: bool = True, repeat: int = 3, **opts) -> list[dict]:
    """METIS vs METIS + km1 V-cycle refinement on every instance × k; prints the table."""
    from partplan.partition.refinement.vcycle import warm_up as fast_warm_up

    compile_s = fast_warm_up()
    rows = []
    if verbose:
        print(f"# numba compile / cache load (not in the timings): {compile_s:.2f} s; min of {repeat} runs", flush=True)
        print(f"{'graph':<14} {'k':>3} {'METIS TV':>9} {'fast TV':>9} {'TV r':>6} {'metis s':>8} "
              f"{'ref s':>7} {'(m+r)/m':>7} {'cpu r':>6} {'imb':>6} {'lvls':>4} {'band':>6}")
    for name in instances:
        g = load_instance(name, fetch=fetch)
        if g is None:
            continue
        for k in ks:
            if k > g.n:
                continue
            r = run_fast(g, k, seed=seed, imbalance=imbalance, repeat=repeat, **opts)
            r["graph"] = name
            rows.append(r)
            if verbose:
                print(f"{name:<14} {k:>3} {r['metis_tv']:>9} {r['fast_tv']:>9} {r['tv_ratio']:>6.3f} "
                      f"{r['metis_s']:>8.3f} {r['refine_s']:>7.3f} {r['time_ratio']:>7.3f} {r['cpu_ratio']:>6.3f} "
                      f"{r['imbalance_after']:>6.4f} {r['levels']:>4} {r['band'] if r['band'] else '-':>6}",
                      flush=True)
    if verbose and rows:
        print(f"geomean: fast TV / METIS TV {gmean([r['tv_ratio'] for r in rows]):.3f} (target <= 0.90), "
              f"(METIS + refine) / METIS time {gmean([r['time_ratio'] for r in rows]):.3f} wall, "
              f"{gmean([r['cpu_ratio'] for r in rows]):.3f} CPU (target <= 3); "
              f"balance kept in {sum(r['balance_ok'] for r in rows)}/{len(rows)}")
    return rows


def run_benchmark(instances=DEFAULT_INSTANCES, ks=(16, 64), *, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE,
                  threads: int = 1, fetch: bool = False, decoupled: bool = True, lp_solver: str = "highs",
                  time_limit: float | None = None, out: str | None = None, verbose: bool = True) -> list[dict]:
    """Run every instance × k; print rows as they finish and the summary;
    write JSON rows to ``out`` when given. Returns the rows."""
    rows = []
    compile_s = warm_up()
    if verbose:
        print(f"# numba compile / cache load (not in the timings): {compile_s:.2f} s", flush=True)
    for name in instances:
        g = load_instance(name, fetch=fetch)
        if g is None:
            continue
        for k in ks:
            if k > g.n:
                continue
            r = run_one(g, k, seed=seed, imbalance=imbalance, threads=threads, decoupled=decoupled,
                        lp_solver=lp_solver, time_limit=time_limit)
            r["graph"] = name
            rows.append(r)
            if verbose:
                print(format_table([r]).splitlines()[1], flush=True)
    if verbose:
        print(format_table(rows))
    if out:
        import os
        import tempfile

        d = os.path.dirname(os.path.abspath(out))
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(rows, fh, indent=1)
        os.replace(tmp, out)
    return rows


def lean_metis(g: Graph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0) -> np.ndarray:
    """pymetis directly on the CSR of a symmetric graph without self loops
    (what :func:`rmat_graph` returns), uniform edge weights, vertex weights
    max(row nnz, 1) as :func:`partplan.partition.engines.metis`, which
    first symmetrizes (P + Pᵀ with int64 values and edge weights: extra copies
    of the matrix); here METIS gets the graph's own arrays. Same objective: on
    a symmetric pattern the backend's edge weights are all 2. (At R-MAT 22
    neither fits 14 GiB: METIS itself reported 11.1 GB resp. 13.1 GB in use
    when an allocation failed.)"""
    import pymetis

    diag = np.repeat(np.arange(g.n), np.diff(g.indptr)) == g.indices
    if not g.is_symmetric() or diag.any():
        raise ValueError("lean_metis needs a symmetric graph without self loops")
    del diag
    vw = np.maximum(g.row_nnz, 1).astype(np.int64)
    opts = pymetis.Options(ufactor=max(1, int(round(imbalance * 1000))), seed=int(seed))
    res = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(g.indptr, g.indices), vweights=vw, options=opts)
    return np.asarray(res.vertex_part, dtype=np.int64)


def run_scale(scale: int, k: int, *, plan: bool = False, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE,
              start: str = "metis", time_limit: float | None = None, verbose: bool = True) -> dict:
    """Scale run: R-MAT ``scale`` (:func:`rmat_graph`), METIS
    (pymetis) as the starting partition — Mt-KaHyPar is too slow at this size
    on a small machine — then bottleneck refinement with no time limit; with
    ``plan`` also :func:`partplan.plan.build_plan` of the METIS partition
    (after the refinement). ``start="degree-rr"``: the degree round-robin
    baseline instead of METIS (METIS's own memory exceeded 13 GB at R-MAT 22).
    Seconds per stage, the refinement's figures, and this process's peak RSS
    (GiB, ``resource.getrusage``: run one scale run per process)."""
    import resource

    from partplan.partition.refinement.refine import refine

    def rss_gib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    t0 = time.perf_counter()
    g = rmat_graph(scale)
    row = {"graph": f"rmat{scale}", "n": g.n, "nnz": g.nnz, "k": k, "gen_s": time.perf_counter() - t0,
           "gen_rss_gib": rss_gib()}
    if verbose:
        print(f"# rmat{scale}: n {g.n}, nnz {g.nnz}, generated in {row['gen_s']:.1f} s", flush=True)
    t0 = time.perf_counter()
    if start == "metis":
        part = lean_metis(g, k, imbalance=imbalance, seed=seed)
    else:
        from partplan.partition.engines.baselines import degree_round_robin

        part = degree_round_robin(g, k)
    row["start"] = start
    row["metis_s"] = time.perf_counter() - t0
    row["metis_rss_gib"] = rss_gib()
    if verbose:
        print(f"# {start} k={k}: {row['metis_s']:.1f} s", flush=True)
    new, rep = refine(g, part, k, objective="max-both", imbalance=imbalance, seed=seed, time_limit=time_limit)
    b, a = rep["before"], rep["after"]
    row.update(refine_s=rep["seconds"], build_s=rep["build_s"], converged_s=rep["converged_s"],
               passes=rep["passes"], moves=rep["moves"], stopped=rep["stopped"],
               max_before=b["max_send_recv"], max_after=a["max_send_recv"],
               max_ratio=a["max_send_recv"] / max(b["max_send_recv"], 1),
               tv_ratio=a["total_volume"] / max(b["total_volume"], 1),
               imbalance_after=a["compute_imbalance"], balance_ok=a["max_balance_weight"] <= rep["balance_cap"],
               peak_rss_gib=rss_gib())
    if verbose:
        print(f"rmat{scale} k={k}: max(send,recv) {row['max_before']} -> {row['max_after']} "
              f"({row['max_ratio']:.3f}), TV {row['tv_ratio']:.4f}, imbalance {row['imbalance_after']:.4f}, "
              f"balance ok {row['balance_ok']}; refine {row['refine_s']:.1f} s ({row['passes']} passes, "
              f"{row['stopped']}), {start} {row['metis_s']:.1f} s; peak RSS {row['peak_rss_gib']:.2f} GiB",
              flush=True)
    if plan:   # after the refinement, so that its figures are printed even if this runs out of memory
        from partplan.plan.builder import build_plan

        t0 = time.perf_counter()
        pl = build_plan(g, part, k)
        row["plan_s"] = time.perf_counter() - t0
        row["plan_rss_gib"] = rss_gib()
        del pl
        if verbose:
            print(f"# plan: {row['plan_s']:.1f} s, peak RSS so far {row['plan_rss_gib']:.2f} GiB", flush=True)
    row["peak_rss_gib"] = rss_gib()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("instances", nargs="*", default=list(DEFAULT_INSTANCES),
                    help=f"synthetic ({', '.join(SYNTHETIC)}) or registered dataset names")
    ap.add_argument("-k", type=positive_int, nargs="+", default=[16, 64], help="part counts (default 16 64)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--imbalance", type=float, default=0.03)
    ap.add_argument("--threads", type=positive_int, default=1, help="Mt-KaHyPar threads (default 1)")
    ap.add_argument("--fetch", action="store_true", help="download registered datasets when missing")
    ap.add_argument("--no-decoupled", action="store_true", help="skip the decoupled-ownership columns")
    ap.add_argument("--lp-solver", choices=["highs", "cbc"], default="highs")
    ap.add_argument("--time-limit", type=float, default=None, help="refinement seconds per run")
    ap.add_argument("--json", dest="out", default=None, help="write the rows to this JSON file")
    ap.add_argument("--fast", action="store_true",
                    help="benchmark the fast mode instead: METIS vs METIS + km1 V-cycle refinement "
                         "(min of --repeat runs each)")
    ap.add_argument("--repeat", type=positive_int, default=3, help="--fast: runs per instance, minimum kept (default 3)")
    ap.add_argument("--fast-option", action="append", default=[], metavar="KEY=VALUE",
                    help="--fast: a vcycle_refine option (repeatable), e.g. cycles=2 or cluster_weight=0.25")
    ap.add_argument("--scale-run", nargs="+", default=None, metavar="SCALE:K",
                    help="instead: R-MAT SCALE, METIS, refinement without a time limit (e.g. 20:256; "
                         "peak RSS: run one per process, under /usr/bin/time -v)")
    ap.add_argument("--scale-plan", action="store_true", help="--scale-run: also build the plan of METIS's partition")
    ap.add_argument("--scale-start", choices=["metis", "degree-rr"], default="metis",
                    help="--scale-run: starting partition (default metis)")
    a = ap.parse_args(argv)
    if a.scale_run:
        rows = []
        for item in a.scale_run:
            sc, _, kk = item.partition(":")
            if not (sc.isdigit() and kk.isdigit()):
                ap.error(f"--scale-run {item!r}: expected SCALE:K, e.g. 20:256")
            rows.append(run_scale(int(sc), int(kk), plan=a.scale_plan, seed=a.seed, imbalance=a.imbalance,
                                  start=a.scale_start, time_limit=a.time_limit))
        if a.out:
            from partplan._atomic import write_json_atomic

            write_json_atomic(rows, a.out)
        return 0
    if a.fast:
        opts = {}
        for item in a.fast_option:
            key, _, val = item.partition("=")
            try:
                opts[key] = json.loads(val)
            except json.JSONDecodeError:
                ap.error(f"--fast-option {item!r}: the value must be a JSON number, true or false")
        rows = run_fast_benchmark(a.instances, a.k, seed=a.seed, imbalance=a.imbalance, fetch=a.fetch,
                                  repeat=a.repeat, **opts)
        if a.out:
            from partplan._atomic import write_json_atomic
            write_json_atomic(rows, a.out)
        return 0
    run_benchmark(a.instances, a.k, seed=a.seed, imbalance=a.imbalance, threads=a.threads, fetch=a.fetch,
                  decoupled=not a.no_decoupled, lp_solver=a.lp_solver, time_limit=a.time_limit, out=a.out)
    return 0


if __name__ == "__main__":
    run(main)
