#!/usr/bin/env python
"""Session 34: is the default's bottleneck limited by its volume budget or by its search?
(docs/planner.md, "Session 34"). In-process, k = 16 and 64, kernels loaded before the first wall.

  knobs   JSON   the default against variants of its own options (``auto_partition`` keywords),
                 e.g. '{"tol.04": {"volume_tolerance": 0.04}, "c4": {"refine_cycles": 4}}'
  seeds   N      the rounds, volume round and cycles run again from the same refined start with
                 seed offsets 1000, 2000, ...: best of 2 .. N of these "chains"
  volclu  R      after the default, R rounds of whole-cluster moves that only lower the total
                 volume (multilevel.cluster_moves with theta = 0, mu = 1e6: no part above the max,
                 within the balance cap), each followed by the km1 volume round

  combine -      (session 36) KaFFPaE-style combine: the default's partition and the default with
                 seed 1; the connected clusters on which both agree move whole from the better one
                 (multilevel.cluster_pass, exact gains, theta = 0, 3 rounds, 3 targets), then a
                 max-both refinement and a volume round; against a control that runs the same
                 refinement and volume round without the combine

Prints one line per case and geometric means against the default (ratios < 1: lower).

    python benchmarks/experiment_search_frontier.py knobs '{"tol.02": {"volume_tolerance": 0.02}}' --half tune
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_families as bf  # noqa: E402
from partplan.partition import pipeline as pl  # noqa: E402


def knobs(cases, variants: dict) -> None:
    rows = {c: [] for c in ["default", *variants]}
    for name, g, k in cases:
        for c in rows:
            t = time.perf_counter()
            part, _ = pl.auto_partition(g, k, **variants.get(c, {}))
            w = time.perf_counter() - t
            f = pl.figures(g, part, k)
            rows[c].append((f["max_send_recv"], f["total_volume"], w))
            print(f"{name} {k} {c}: max {f['max_send_recv']} tv {f['total_volume']} wall {w:.2f}", flush=True)
    base = rows.pop("default")
    for c, r in rows.items():
        g3 = [bf.gmean([a[i] / b[i] for a, b in zip(r, base)]) for i in range(3)]
        higher, lower = sum(a[0] > b[0] for a, b in zip(r, base)), sum(a[0] < b[0] for a, b in zip(r, base))
        print(f"== {c}: max x{g3[0]:.4f} tv x{g3[1]:.4f} wall x{g3[2]:.3f} (cases higher: {higher}, lower: {lower})")


def seeds(cases, n: int) -> None:
    off = [0]
    for fn in ("_more_rounds", "_volume_round", "_cycles"):   # every stage after the first refinement
        orig = getattr(pl, fn)

        def shifted(graph, k, part, rep, imbalance, seed, *a, _orig=orig, **kw):
            return _orig(graph, k, part, rep, imbalance, seed + off[0], *a, **kw)
        setattr(pl, fn, shifted)
    res = []
    for name, g, k in cases:
        got = []
        for i in range(n):
            off[0] = 1000 * i
            part, _ = pl.auto_partition(g, k)
            f = pl.figures(g, part, k)
            got.append((f["max_send_recv"], f["total_volume"]))
        print(name, k, got, flush=True)
        res.append(got)
    for m in range(2, n + 1):
        print(f"== best of {m} chains: max x{bf.gmean([min(r[:m])[0] / r[0][0] for r in res]):.4f} "
              f"tv x{bf.gmean([min(r[:m])[1] / r[0][1] for r in res]):.4f}")


def volclu(cases, rounds: int) -> None:
    from partplan.partition.multilevel import cluster_moves
    from partplan.partition.objectives import balance_cap
    from partplan.partition.refine import _State, refine

    ratios = []
    for name, g, k in cases:
        part, rep = pl.auto_partition(g, k)
        f0 = pl.figures(g, part, k)
        out, w = part.copy(), g.balance_weights
        cap = balance_cap(w, out, k, 0.03)[0]
        lim = pl.compute_limit(g, out, k, 0.03)
        t, trail = time.perf_counter(), []
        for r in range(rounds):
            st = _State(g, out, k, lim.get("weights2"), lim.get("cap2"))
            cm = cluster_moves(g, st, out, k, w, cap, f0["total_volume"], 3, 0.0, 0.0, 16, 1e6, seed=r, theta=0.0,
                               max_rounds=3, max_targets=3)
            st.check(out)
            out, _ = refine(g, out, k, objective="total", imbalance=0.03, seed=r, volume_tolerance=0.0,
                            max_cost=f0["max_send_recv"], work_limit=pl.work_units(g, pl.DEFAULT_VOLUME_WORK), **lim)
            f = pl.figures(g, out, k)
            trail.append((cm["moves"], f["total_volume"], f["max_send_recv"]))
        load = int(np.bincount(out, weights=w, minlength=k).max())
        assert f["max_send_recv"] <= f0["max_send_recv"] and load <= cap, (name, k)
        ratios.append(f["total_volume"] / f0["total_volume"])
        print(f"{name} {k}: max {f0['max_send_recv']} tv {f0['total_volume']} -> (moves, tv, max) {trail} "
              f"in {time.perf_counter() - t:.2f} s (pipeline {rep['seconds']:.2f} s)", flush=True)
    print(f"== total volume x{bf.gmean(ratios):.4f}, max(send, recv) never higher")


def _overlay(g, p1, p2):
    """Connected clusters of the vertices whose (p1, p2) labels agree: (count, cluster id per vertex)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    A = sp.csr_matrix((np.ones(g.nnz), g.indices, g.indptr), shape=(g.n, g.n))
    A = sp.triu(A + A.T, 1).tocoo()
    same = (p1[A.row] == p1[A.col]) & (p2[A.row] == p2[A.col])
    nc, cid = connected_components(sp.csr_matrix((np.ones(int(same.sum())), (A.row[same], A.col[same])),
                                                 shape=(g.n, g.n)), directed=False)
    return nc, cid.astype(np.int64)


def _polish(g, part, k, vref, seed):
    """The pipeline's own stages once: a max-both refinement (total volume at most vref, 2 work
    units per pin) and a volume round."""
    out, r = pl._refine_max(g, part, k, 0.03, seed, vref, 0.0, None, pl.work_units(g, 2.0), None)
    budget = pl.Budget.of(g, pl.DEFAULT_REFINE_WORK, pl.DEFAULT_ROUNDS_WORK, None)
    return pl._volume_round(g, k, out, r, 0.03, seed, pl.DEFAULT_VOLUME_WORK, budget, None)[0]


def combine(cases) -> None:
    from partplan.partition import _fm
    from partplan.partition._fm import apply_scratch
    from partplan.partition.multilevel import ClusterOptions, Clusters, ClusterScratch, _members, cluster_pass
    from partplan.partition.objectives import balance_cap
    from partplan.partition.refine import _State

    res = []
    for name, g, k in cases:
        parts = [pl.auto_partition(g, k, seed=s) for s in (0, 1)]
        (p1, r1), (p2, _) = sorted(parts, key=lambda pr: (pr[1]["volume_round"]["after"]["max_send_recv"],
                                                          pr[1]["volume_round"]["after"]["total_volume"]))
        f1 = pl.figures(g, p1, k)
        vref = max(int(r1["refine"]["volume_limit"]), f1["total_volume"])
        nc, cid = _overlay(g, p1, p2)
        pc, w = p1.copy(), g.balance_weights
        lim = pl.compute_limit(g, pc, k, 0.03)
        st = _State(g, pc, k, lim.get("weights2"), lim.get("cap2"))
        cap = balance_cap(w, pc, k, 0.03)[0]
        T, P, V = st.records(pc, w)
        S = ClusterScratch(apply_scratch(int(np.diff(st.vptr).max()), k), *(np.zeros(k, np.int64) for _ in range(3)),
                           np.zeros(k, np.bool_))
        cptr, cmem = _members(cid, nc)
        kept = cluster_pass(T, P, V, _fm.CostModel(3, 0.0, 1.0, 16, 0.0), _fm.Limits(cap, cap, vref, vref, 3, -1.0, st.cap2),
                            Clusters(cptr, cmem, np.random.default_rng(0).permutation(nc).astype(np.int64)),
                            ClusterOptions(0.0, 3, 0.0, 1, -1.0), S, np.zeros(3, np.int64))
        st.check(pc)
        fc = pl.figures(g, _polish(g, pc, k, vref, 7), k)
        fn = pl.figures(g, _polish(g, p1.copy(), k, vref, 7), k)
        res.append((f1["max_send_recv"], fc["max_send_recv"], fn["max_send_recv"]))
        print(f"{name} {k}: better of the two {f1['max_send_recv']}; {nc} clusters, {kept} moved; combined "
              f"{fc['max_send_recv']} (tv {fc['total_volume']}); control {fn['max_send_recv']} (tv {fn['total_volume']})",
              flush=True)
    print(f"== combine x{bf.gmean([b / a for a, b, _ in res]):.4f}, control x{bf.gmean([c / a for a, _, c in res]):.4f} "
          f"(vs the better of the two chains)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--half", default="tune", help="tune, report or comma-separated graph names")
    ap.add_argument("--k", type=int, nargs="+", default=[16, 64])
    ap.add_argument("what", choices=["knobs", "seeds", "volclu", "combine"])
    ap.add_argument("arg", nargs="?", default="", help="knobs: JSON of variants; seeds: chains; volclu: rounds")
    a = ap.parse_args(argv)
    names = bf.TUNE if a.half == "tune" else bf.REPORT if a.half == "report" else tuple(a.half.split(","))
    pl.auto_partition(bf.load_instance("power"), 4)          # compiled kernels loaded outside the walls
    cases = [(name, g, k) for name in names if (g := bf.load_instance(name)) is not None for k in a.k]
    {"knobs": lambda: knobs(cases, json.loads(a.arg)), "seeds": lambda: seeds(cases, int(a.arg)),
     "volclu": lambda: volclu(cases, int(a.arg)), "combine": lambda: combine(cases)}[a.what]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
