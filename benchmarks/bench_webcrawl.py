"""The default partitioner on generated web crawls with host structure
(:func:`partplan.datasets.web_host_crawl`), against METIS, Mt-KaHyPar and KaMinPar in the
same run; and the generated crawl's structure beside the published statistics of real
crawls (docs/design/webcrawl-generator.md).

Methods (all through :func:`partplan.partition`):

  default        partition(g, k)                                           (the "auto" pipeline)
  metis          partition(g, k, model="graph", backend="metis", objective="total")
  mtkahypar      partition(g, k, model="hypergraph", backend="mtkahypar", objective="total")
  kaminpar       partition(g, k, backend="kaminpar")
  metis+refine   partition(g, k, model="graph", backend="metis", objective="max-both")     (--alt)
  kaminpar+refine partition(g, k, model="graph", backend="kaminpar", objective="max-both") (--alt)

Per case: max(send, recv) = max(stats.max_send, stats.max_recv), total = stats.total_volume,
wall seconds; ratios vs the best peer (the lowest max, and separately the lowest total, among
METIS / Mt-KaHyPar / KaMinPar). The machine may be shared: compare ratios, not seconds.

  python benchmarks/bench_webcrawl.py --stats                      # structure only
  python benchmarks/bench_webcrawl.py --seeds 1 2 --k 16 64 --alt --json out.json
  python benchmarks/bench_webcrawl.py --n 50000 --seeds 1 --k 16   # quick
  python benchmarks/bench_webcrawl.py --seeds 1 --param shuffle=true # random ids, not crawl order
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import nonneg_int, positive_int  # noqa: E402

NOTREDAME_N = 325_729

PEERS = ("metis", "mtkahypar", "kaminpar")
METHODS = {
    "default": {},
    "metis": dict(model="graph", backend="metis", objective="total"),
    "mtkahypar": dict(model="hypergraph", backend="mtkahypar", objective="total"),
    "kaminpar": dict(backend="kaminpar"),
}
ALT = {
    "metis+refine": dict(model="graph", backend="metis", objective="max-both"),
    "kaminpar+refine": dict(model="graph", backend="kaminpar", objective="max-both"),
}


def _tail_exponent(d: np.ndarray, dmin: int) -> float:
    """Discrete power-law MLE (Clauset-Shalizi-Newman approximation) of the tail d ≥ dmin."""
    x = d[d >= dmin].astype(float)
    return float(1.0 + x.size / np.log(x / (dmin - 0.5)).sum()) if x.size else float("nan")


def crawl_stats(gd, host=None, sample: int = 20000, seed: int = 0) -> dict:
    """SNAP's statistics of a directed crawl ``gd`` (a directed :class:`Graph`); ``host``
    (int[n]) adds the intra-host link share and host sizes. Clustering is SNAP's average
    (vertices of degree < 2 count 0) on ``sample`` random vertices of the undirected graph;
    triangles exact (degree-ordered orientation, scipy); the diameter a lower bound (4 BFS
    sweeps from the farthest vertex found)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components, shortest_path

    n = gd.n
    a = sp.csr_matrix((np.ones(gd.nnz, dtype=np.int8), gd.indices, gd.indptr), shape=(n, n))
    src = np.repeat(np.arange(n), np.diff(gd.indptr))
    dst = gd.indices
    ind = np.bincount(dst, minlength=n)
    outd = np.diff(gd.indptr)
    s = ((a + a.T) > 0).astype(np.int8).tocsr()
    s.setdiag(0)
    s.eliminate_zeros()
    deg = np.diff(s.indptr)
    r = {"n": n, "edges_directed": int(gd.nnz), "edges_undirected": int(s.nnz // 2)}
    _, lab = connected_components(a, directed=True, connection="weak")
    r["largest_wcc_share"] = float(np.bincount(lab).max() / n)
    _, lab = connected_components(a, directed=True, connection="strong")
    r["largest_scc_share"] = float(np.bincount(lab).max() / n)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((np.arange(n), deg))] = np.arange(n)
    c = s.tocoo()
    keep = rank[c.row] < rank[c.col]
    low = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.int64), (c.row[keep], c.col[keep])), shape=(n, n))
    tri = int(np.asarray(((low @ low).multiply(low)).sum()))
    r["triangles"] = tri
    r["closed_triangle_fraction"] = 3.0 * tri / float((deg * (deg - 1) / 2.0).sum())
    rng = np.random.default_rng(seed)
    vs = rng.choice(n, size=min(sample, n), replace=False)
    sub = s[vs]
    t = np.asarray((sub @ s).multiply(sub).sum(axis=1)).ravel() / 2.0
    dv = deg[vs].astype(float)
    r["avg_clustering_sampled"] = float(np.where(dv >= 2, t / np.maximum(dv * (dv - 1) / 2.0, 1.0), 0.0).mean())
    r["max_in_degree"] = int(ind.max())
    r["max_out_degree"] = int(outd.max())
    r["in_exponent_mle_d10"] = _tail_exponent(ind, 10)
    r["out_exponent_mle_d10"] = _tail_exponent(outd, 10)
    r["in_exponent_mle_d50"] = _tail_exponent(ind, 50)
    r["out_exponent_mle_d50"] = _tail_exponent(outd, 50)
    r["no_out_link_share"] = float((outd == 0).mean())
    far, best = int(np.argmax(deg)), 0
    for _ in range(4):
        d = shortest_path(s, unweighted=True, indices=far, directed=False)
        d[~np.isfinite(d)] = -1
        far = int(np.argmax(d))
        best = max(best, int(d[far]))
    r["diameter_lower_bound"] = best
    if host is not None:
        r["intra_host_link_share"] = float((host[src] == host[dst]).mean())
        hs = np.bincount(host)
        r["hosts"] = int(hs.size)
        r["largest_host"] = int(hs.max())
        r["host_size_exponent_mle_s10"] = _tail_exponent(hs, 10)
    return r


def run_case(g, k: int, methods: dict) -> dict:
    from partplan import partition

    rows = {}
    for name, kw in methods.items():
        t = time.perf_counter()
        p = partition(g, k, **kw)
        wall = time.perf_counter() - t
        st = p.stats
        rows[name] = {"max": int(max(st.max_send, st.max_recv)), "total": int(st.total_volume),
                      "wall_s": round(wall, 2)}
        print(f"    {name:16s} max {rows[name]['max']:8d}  total {rows[name]['total']:9d}  "
              f"{wall:7.1f} s", flush=True)
    best_max = min(rows[p]["max"] for p in PEERS)
    best_total = min(rows[p]["total"] for p in PEERS)
    for row in rows.values():
        row["max_vs_best_peer"] = round(row["max"] / best_max, 4)
        row["total_vs_best_peer"] = round(row["total"] / best_total, 4)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=NOTREDAME_N, help="pages (default NotreDame's 325,729)")
    ap.add_argument("--seeds", type=nonneg_int, nargs="+", default=[1, 2])
    ap.add_argument("--k", type=positive_int, nargs="+", default=[16, 64])
    ap.add_argument("--alt", action="store_true", help="also METIS / KaMinPar + partplan's max-both refinement")
    ap.add_argument("--stats", action="store_true", help="print the generated crawl's statistics only")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a web_host_crawl parameter other than its default (repeatable), e.g. shuffle=true")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    from partplan.datasets import web_host_crawl

    params = {}
    for item in args.param:
        key, _, val = item.partition("=")
        try:
            params[key] = json.loads(val.lower() if val.lower() in ("true", "false") else val)
        except json.JSONDecodeError:
            ap.error(f"argument --param: expected KEY=VALUE with a JSON value (number, true/false, "
                     f"quoted string), got {item!r}")

    out = {"generator": "partplan.datasets.web_host_crawl", "params": params, "n": args.n, "stats": {}, "cases": []}
    for seed in args.seeds:
        gd, host = web_host_crawl(args.n, seed=seed, symmetrize=False, return_hosts=True, **params)
        st = crawl_stats(gd, host)
        out["stats"][str(seed)] = st
        print(f"seed {seed}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                           for k, v in st.items()), flush=True)
    if not args.stats:
        methods = dict(METHODS, **(ALT if args.alt else {}))
        for seed in args.seeds:
            g = web_host_crawl(args.n, seed=seed, **params)
            for k in args.k:
                print(f"web_host_crawl n={args.n} seed={seed} k={k}", flush=True)
                rows = run_case(g, k, methods)
                out["cases"].append({"seed": seed, "k": k, "methods": rows})
                d = rows["default"]
                print(f"  default vs best peer: max {d['max_vs_best_peer']:.3f}x, "
                      f"total {d['total_vs_best_peer']:.3f}x", flush=True)
        if out["cases"]:
            gm = lambda key, m="default": math.exp(np.mean([math.log(c["methods"][m][key]) for c in out["cases"]]))
            out["geomean"] = {m: {"max_vs_best_peer": round(gm("max_vs_best_peer", m), 4),
                                  "total_vs_best_peer": round(gm("total_vs_best_peer", m), 4)}
                              for m in methods}
            print("geometric mean vs best peer (max, total):")
            for m, v in out["geomean"].items():
                print(f"  {m:16s} {v['max_vs_best_peer']:.3f}x  {v['total_vs_best_peer']:.3f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
