#!/usr/bin/env python
"""Rows of H per rank: what the partitioners leave on one rank beside the nonzeros they balance.

For each graph and k, prints the largest part's rows (each a row of H, of every activation and of
a GNN layer's dense work) and nonzeros (the SpMM's compute), each over the mean, with
max(send, recv) and the total volume (rows of H), for

* ``nnz``  — ``partition(graph, k)``: the default pipeline, balancing row nonzeros;
* ``rows`` — ``partition(graph.with_balance("rows"), k)`` (``--balance rows``);
* ``mpi``  — with ``--nprocs N``: ``partition GRAPH -k K --nprocs N`` (the engine rule, the
  distributed refinement and passes, then the isolated rows' placement), with
  ``--rounds`` to force the distributed rounds instead of the whole-graph refinement that a graph
  of at most 2^24 pins gets.

Every figure is counted here from the returned partition (numpy bincounts, ``analyze``).

    python benchmarks/bench_rows.py                                  # R-MAT 15/16, email-Enron, astro-ph
    python benchmarks/bench_rows.py --graphs rmat:15 --ks 16 --nprocs 2 --rounds --json rows.json
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import nonneg_int, positive_int  # noqa: E402


def load(spec: str):
    if spec.startswith("rmat:"):
        from partplan.datasets.generators import rmat
        return rmat(int(spec.split(":")[1]), seed=1)
    from partplan.datasets import load_graph
    return load_graph(spec, fetch=True)


def figures(g, part: np.ndarray, k: int) -> dict:
    from partplan.metrics.stats import analyze
    s = analyze(g, part, k).summary()
    rows = np.bincount(part, minlength=k)
    nnz = np.bincount(part, weights=g.row_nnz, minlength=k)
    return {"rows_max_over_mean": round(float(rows.max() / (g.n / k)), 3),
            "nnz_max_over_mean": round(float(nnz.max() / max(nnz.mean(), 1e-12)), 3),
            "max_send_recv": int(max(s["max_send"], s["max_recv"])), "total_volume": int(s["total_volume"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["rmat:15", "rmat:16", "email-Enron", "astro-ph"])
    ap.add_argument("--ks", type=positive_int, nargs="+", default=[16, 64])
    ap.add_argument("--nprocs", type=nonneg_int, default=0, help="also the distributed partitioner on N processes")
    ap.add_argument("--rounds", action="store_true", help="--nprocs: the distributed rounds on any size")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if min(a.ks) < 1 or a.nprocs < 0:
        ap.error("--ks must be >= 1 and --nprocs >= 0")
    if a.rounds and not a.nprocs:
        ap.error("--rounds applies with --nprocs N")
    if a.json and not Path(a.json).resolve().parent.is_dir():
        ap.error(f"--json {a.json}: no such folder")
    from partplan.errors import PartplanError
    try:
        graphs = [(spec, load(spec)) for spec in a.graphs]      # every graph before any partition
    except (PartplanError, ValueError, IndexError) as exc:
        ap.error(f"--graphs: {exc}")
    from partplan.partition.api import partition
    rows = []
    print(f"{'graph':14s} {'k':>3s} {'how':5s} {'rows max/mean':>13s} {'nnz max/mean':>12s} {'max(s,r)':>9s} "
          f"{'total':>9s}")
    for spec, g in graphs:
        iso = int(((g.row_nnz == 0) & (np.bincount(g.indices, minlength=g.n) == 0)).sum())
        for k in a.ks:
            runs = {"nnz": partition(g, k).part, "rows": partition(g.with_balance("rows"), k).part}
            if a.nprocs:
                from partplan.partition.context import DistributedRefineContext
                from partplan.partition.pipeline.distributed import distributed_partition
                with tempfile.TemporaryDirectory() as d:
                    ctx = DistributedRefineContext(gather_max_pins=0) if a.rounds else None
                    distributed_partition(g, k, nprocs=a.nprocs, output=Path(d) / "p.npy", quiet=True, context=ctx)
                    runs["mpi"] = np.load(Path(d) / "p.npy")
            for how, part in runs.items():
                f = figures(g, part, k)
                rows.append({"graph": spec, "n": g.n, "isolated_rows": iso, "k": k, "how": how, **f})
                print(f"{spec:14s} {k:3d} {how:5s} {f['rows_max_over_mean']:13.3f} {f['nnz_max_over_mean']:12.3f} "
                      f"{f['max_send_recv']:9d} {f['total_volume']:9d}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"command": "python benchmarks/bench_rows.py " + " ".join(argv or sys.argv[1:]),
                                            "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
