"""Streaming partitioner vs METIS vs hash.

For each graph (R-MAT scales, a 2D mesh), written as a chunked graph
directory first, each method runs in its own fresh subprocess, so that its
peak RSS (VmHWM, :func:`partplan._process.peak_rss_bytes`) above the
process's baseline (VmRSS after the imports and, for the streaming runs, after loading the
compiled kernel on a 2-vertex graph: the numba/LLVM runtime, ~40 MiB, a fixed
cost reported as ``kernel_load_rss``) is its own:

* ``stream1`` / ``stream3``: :func:`partplan.partition.engines.stream.stream_partition`
  (Fennel, 1 and 3 passes) straight from the chunked directory (the graph is
  never held);
* ``metis``: :func:`partplan.io.chunked.read_chunked` (the whole graph) +
  :func:`partplan.partition.engines.metis` (pymetis, ε = 0.03, nnz weights);
* ``hash``: v mod k (no graph read).

Then the parent loads the graph once and computes every partition's total
volume and max(send, recv) with :func:`partplan.metrics.analyze`; ratios are
against METIS of the same run.

    .venv/bin/python benchmarks/bench_stream.py                 # R-MAT 16, 18, grid2d 256x256; k = 64
    .venv/bin/python benchmarks/bench_stream.py --scales 16 --mesh 128 --k 16 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from partplan.bench.script import run
from partplan.jobs.args import nonneg_int, positive_int

METHODS = ("hash", "stream1", "stream3", "ldg3", "metis")


def worker(method: str, path: str, k: int, out: str) -> None:
    from partplan._process import current_rss_bytes, peak_rss_bytes
    from partplan.partition.engines import stream as _stream  # noqa: F401  (imports + numba, part of the baseline)
    if method == "metis":
        import pymetis  # noqa: F401
        from partplan.partition.engines import metis
        from partplan.io.chunked import read_chunked
    from partplan.io.chunked import chunk_info
    from partplan.graph import Graph
    pre = current_rss_bytes()
    if method != "metis" and method != "hash":   # load the compiled kernel (numba/LLVM runtime) into the baseline
        _stream.stream_partition(Graph.from_edges([0], [1], n=2, symmetrize=True), 2)
    base = current_rss_bytes()
    t0 = time.perf_counter()
    info = {}
    if method == "hash":
        n = chunk_info(path).n
        part = np.arange(n, dtype=np.int64) % k
    elif method in ("stream1", "stream3", "ldg3"):
        st = {}
        meth = "ldg" if method.startswith("ldg") else "fennel"
        part = _stream.stream_partition(path, k, method=meth, passes=1 if method == "stream1" else 3, stats=st)
        info = {"overflow": st["overflow"], "max_load": st["max_load"], "cap": st["cap"],
                "pass_s": [round(r["wall_s"], 3) for r in st["passes"]]}
    else:
        g = read_chunked(path)
        info["load_s"] = round(time.perf_counter() - t0, 3)
        part = metis(g, k, imbalance=0.03)
    wall = time.perf_counter() - t0
    np.save(out, part)
    print(json.dumps({"wall_s": wall, "peak_above_base": peak_rss_bytes() - base, "base_rss": base,
                      "kernel_load_rss": base - pre, **info}))


def run_one(method, path, k, out) -> dict:
    env = dict(os.environ, PARTPLAN_QUIET="1")
    r = subprocess.run([sys.executable, __file__, "--worker", method, str(path), str(k), str(out)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{method} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=int, nargs="*", default=[16, 18])
    ap.add_argument("--mesh", type=nonneg_int, default=256, help="grid2d side (0: none)")
    ap.add_argument("--k", type=positive_int, default=64)
    ap.add_argument("--chunks", type=positive_int, default=8)
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", nargs=4, metavar=("METHOD", "PATH", "K", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.worker[0], a.worker[1], int(a.worker[2]), a.worker[3])
        return 0

    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.datasets.generators import grid2d
    from partplan.io.chunked import read_chunked, write_chunked
    from partplan.metrics import analyze

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as d:
        graphs = [(f"rmat{s}", lambda p, s=s: rmat_chunked(s, path=p, chunks=a.chunks)) for s in a.scales]
        if a.mesh:
            graphs.append((f"grid2d-{a.mesh}", lambda p: write_chunked(grid2d(a.mesh, a.mesh), p, chunks=a.chunks)))
        for name, make in graphs:
            path = Path(d) / f"{name}.chunked"
            make(path)
            res = {m: run_one(m, path, a.k, Path(d) / f"{name}-{m}.npy") for m in METHODS}
            g = read_chunked(path)
            for m in METHODS:
                s = analyze(g, np.load(Path(d) / f"{name}-{m}.npy"), a.k)
                res[m].update(total=s.total_volume, max_sr=max(s.max_send, s.max_recv),
                              imb=float(s.compute_load.max() / s.compute_load.mean() - 1))
            ref = res["metis"]
            for m in METHODS:
                r = res[m]
                rows.append({"graph": name, "n": g.n, "nnz": g.nnz, "k": a.k, "method": m, **r,
                             "total_vs_metis": r["total"] / ref["total"], "max_vs_metis": r["max_sr"] / ref["max_sr"],
                             "peak_vs_metis": r["peak_above_base"] / max(ref["peak_above_base"], 1)})
            del g
    hdr = (f"{'graph':<13}{'method':<9}{'wall s':>8}{'peak MiB':>10}{'total':>11}{'max(s,r)':>10}"
           f"{'imb':>7}{'tot/METIS':>10}{'max/METIS':>10}{'peak/METIS':>11}")
    print(hdr)
    for r in rows:
        print(f"{r['graph']:<13}{r['method']:<9}{r['wall_s']:>8.2f}{r['peak_above_base'] / 2**20:>10.1f}"
              f"{r['total']:>11,}{r['max_sr']:>10,}{r['imb']:>7.3f}{r['total_vs_metis']:>10.3f}"
              f"{r['max_vs_metis']:>10.3f}{r['peak_vs_metis']:>11.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    run(main)
