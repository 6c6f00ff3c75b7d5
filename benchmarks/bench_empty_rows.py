"""The default pipeline on directed graphs with empty rows (pages without out-links): the compute
repair's effect (issue 20, session 30).

A row with no nonzero but read by other rows weighs 1 in the planner's balance and 0 in compute,
so every stage, which keeps the balance limit, can leave a part above ε in compute. The default
ends with :func:`partplan.partition.rebalance.repair_compute`. Per graph and k this prints the
compute imbalance and max(send, recv) before the repair (the pipeline's volume round) and after
it (the result), the rows it moved, and the geometric mean of the max's ratio.

Three generated families, 8,192 rows, k = 16 and 64:

* ``pareto``: 10 edges per row, 10-50 % of the rows without out-links, skewed in-degrees;
* ``banded``: links to nearby ids (σ = 50), 10-40 % of the rows without out-links (a crawl in
  URL order);
* ``rmat``: directed R-MAT (0.57, 0.19, 0.19), edge factor 8, isolated rows kept (41 % empty).

``--half tune`` (seeds 0-2 of pareto and banded: what NEAR_PASSES was chosen on), ``--half
report`` (seeds 3-5, and rmat seeds 0-2). Run ``python benchmarks/bench_empty_rows.py --help``.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from partplan.graph import Graph
from partplan.partition.pipeline import auto_partition, figures

N = 8192
HALVES = {"tune": [("pareto", s) for s in (0, 1, 2)] + [("banded", s) for s in (0, 1, 2)],
          "report": [("pareto", s) for s in (3, 4, 5)] + [("banded", s) for s in (3, 4, 5)]
          + [("rmat", s) for s in (0, 1, 2)]}


def directed_graph(kind: str, n: int, seed: int) -> Graph:
    """One generated directed graph of the family ``kind`` (module doc), ``n`` rows (a power of 2
    for rmat)."""
    rng = np.random.default_rng(seed)
    if kind == "pareto":
        m = 10 * n
        src = rng.integers(int(rng.uniform(0.1, 0.5) * n), n, m)
        dst = (rng.pareto(1.2, m) * 30).astype(np.int64) % n
    elif kind == "banded":
        m = 8 * n
        src = rng.integers(0, n, m)
        dst = np.clip(src + rng.normal(0, 50, m).astype(np.int64), 0, n - 1)
        keep = ~(rng.random(n) < rng.uniform(0.1, 0.4))[src]
        src, dst = src[keep], dst[keep]
    elif kind == "rmat":
        scale, m = int(math.log2(n)), 8 * n
        src, dst = np.zeros(m, np.int64), np.zeros(m, np.int64)
        for level in range(scale):
            r = rng.random(m)
            src |= (r > 0.76).astype(np.int64) << level
            dst |= (((r > 0.57) & (r <= 0.76)) | (r > 0.95)).astype(np.int64) << level
    else:
        raise ValueError(f"unknown family {kind!r}")
    return Graph.from_edges(src, dst, n=n)


def run(half: str, ks=(16, 64), imbalance: float = 0.03) -> list[dict]:
    rows = []
    for kind, seed in HALVES[half]:
        g = directed_graph(kind, N, seed)
        for k in ks:
            part, rep = auto_partition(g, k, imbalance=imbalance)
            after = figures(g, part, k)
            rr = rep.get("compute_repair")
            vr = rep.get("volume_round") or {}
            before_max = (vr.get("after") or {}).get("max_send_recv", after["max_send_recv"]) if rr else \
                after["max_send_recv"]
            before_ci = (vr.get("after") or {}).get("compute_imbalance", after["compute_imbalance"]) if rr else \
                after["compute_imbalance"]
            rows.append({"graph": f"{kind}-{seed}", "k": k, "empty_share": float((g.row_nnz == 0).mean()),
                         "compute_imbalance_before": before_ci, "compute_imbalance": after["compute_imbalance"],
                         "max_before": before_max, "max": after["max_send_recv"],
                         "moved": rr["moved"] if rr else [0, 0]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=sorted(HALVES), default="report")
    ap.add_argument("--k", type=int, nargs="+", default=[16, 64])
    args = ap.parse_args(argv)
    rows = run(args.half, args.k)
    print("| graph | k | empty rows | compute imbalance before → after | max(send, recv) before → after | "
          "rows moved (nnz, empty) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['graph']} | {r['k']} | {r['empty_share']:.2f} | {r['compute_imbalance_before']:.4f} → "
              f"{r['compute_imbalance']:.4f} | {r['max_before']} → {r['max']} (×{r['max'] / r['max_before']:.3f}) | "
              f"{r['moved'][0]}, {r['moved'][1]} |")
    ratios = [r["max"] / r["max_before"] for r in rows]
    print(f"\nmax(send, recv) after / before the repair: geometric mean ×{math.exp(np.mean(np.log(ratios))):.3f}, "
          f"worst ×{max(ratios):.3f} ({args.half} half, {len(rows)} cases)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
