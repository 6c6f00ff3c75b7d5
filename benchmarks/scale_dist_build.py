#!/usr/bin/env python
"""Peak memory of the single-process plan build vs the distributed one.

Writes an R-MAT graph as a chunked graph (partplan.datasets.chunked_gen, never
whole in memory), a random partition into p parts (.npy), then

* single: a fresh process reads the graph (read_chunked), build_plan, write_plan;
* distributed: N processes (the plan-build job, partplan.jobs.build, gloo)
  build the same plan from the chunks;

for a layout (``--layout``: 1d, 1.5d:c, 2d:RxC) on k ranks (``--k``, default N),
of A or of its GCN / mean normalization (``--normalize gcn|mean``: Â's values, A + I's pattern),

and prints wall time and peak RSS (VmHWM, reset per stage via
/proc/self/clear_refs where allowed) per stage and per rank, the ratio of the
largest per-rank peak to the single-process peak (target at scale 22:
<= 0.35), and whether the two plans are byte-identical (created left out).

Usage: python benchmarks/scale_dist_build.py [--scale 18] [--nprocs 4] [--k K] [--layout L] [--chunks 16]
       [--normalize gcn|mean] [--json OUT]
Default scale 18; 20 takes a few minutes on 2 cores; 22 needs ~8 GiB for the
single-process side. Units: MiB (2**20 bytes), seconds.
"""
from __future__ import annotations

import argparse
import filecmp
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

SINGLE = r"""
import json, sys, time
import numpy as np
from partplan._process import Stages
from partplan.io.chunked import read_chunked
from partplan.plan import build_plan, write_plan
graph, part, k, out, res, layout = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
normalize = sys.argv[7] if sys.argv[7] != "none" else None
st = Stages()
st.start("read"); g = read_chunked(graph); p = np.load(part); st.stop()
st.start("build"); plan = build_plan(g, p, k, layout=layout, f=128, normalize=normalize); st.stop()
st.start("write"); write_plan(plan, out, created=False); st.stop()
json.dump({"stages": st.rows, "baseline_rss_bytes": st.baseline, "peak_rss_bytes": max(r["peak_rss_bytes"] for r in st.rows),
           "n": g.n, "nnz": g.nnz}, open(res, "w"))
"""

MiB = float(1 << 20)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--nprocs", type=positive_int, default=4)
    ap.add_argument("--k", type=positive_int, help="plan ranks (default: --nprocs)")
    ap.add_argument("--layout", default="1d", help="1d, 1.5d:c or 2d:RxC (default 1d)")
    ap.add_argument("--chunks", type=positive_int, default=16)
    ap.add_argument("--seed", type=nonneg_int, default=0)
    ap.add_argument("--normalize", choices=("none", "gcn", "mean"), default="none",
                    help="plan Â (gcn: D^-1/2 (A+I) D^-1/2, mean: D^-1 (A+I)) instead of A")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--workdir", help="keep the graph and plans here (default: a temporary dir, removed)")
    a = ap.parse_args(argv)
    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.jobs.build import build_distributed
    from partplan.layouts import parse_layout
    k = a.k or a.nprocs
    blocks = parse_layout(a.layout, k).row_blocks

    work = Path(a.workdir or tempfile.mkdtemp(prefix="scale-dist-build-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    gp = rmat_chunked(a.scale, seed=a.seed, path=work / f"rmat{a.scale}.chunked", chunks=a.chunks)
    t_gen = time.perf_counter() - t
    n = 1 << a.scale
    part = np.random.default_rng(a.seed).integers(0, blocks, n)
    np.save(work / "part.npy", part)
    del part

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", SINGLE, str(gp), str(work / "part.npy"), str(k),
                    str(work / "single.plan"), str(work / "single.json"), a.layout, a.normalize], check=True,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    t_single = time.perf_counter() - t
    single = json.loads((work / "single.json").read_text())

    t = time.perf_counter()
    dist = build_distributed(gp, work / "part.npy", k, work / "dist.plan", nprocs=a.nprocs, layout=a.layout, f=128,
                             created=False, timeout_s=3000, normalize=None if a.normalize == "none" else a.normalize)
    t_dist = time.perf_counter() - t

    files = sorted(os.listdir(work / "single.plan"))
    same = files == sorted(os.listdir(work / "dist.plan")) and all(
        filecmp.cmp(work / "single.plan" / f, work / "dist.plan" / f, shallow=False) for f in files)
    per_rank_peak = max(r["peak_rss_bytes"] for r in dist["per_rank"])
    ratio = per_rank_peak / single["peak_rss_bytes"]

    print(f"R-MAT scale {a.scale}: n = {single['n']}, nnz = {single['nnz']}; layout {a.layout} on k = {k} ranks; "
          f"chunked graph written in {t_gen:.1f} s ({a.chunks} chunks); normalize {a.normalize}")
    print(f"\nsingle process (read_chunked + build_plan + write_plan), {t_single:.1f} s wall; "
          f"RSS before reading {single['baseline_rss_bytes'] / MiB:.1f} MiB:")
    for s in single["stages"]:
        print(f"  {s['stage']:<10} {s['seconds']:8.2f} s   peak {s['peak_rss_bytes'] / MiB:9.1f} MiB")
    print(f"\ndistributed, {a.nprocs} processes (gloo), {t_dist:.1f} s wall; peak RSS per stage (MiB):")
    stages = [s["stage"] for s in dist["per_rank"][0]["stages"]]
    print("  rank  baseline" + "".join(f"{x:>10}" for x in stages) + "      peak")
    for r in dist["per_rank"]:
        row = {s["stage"]: s["peak_rss_bytes"] / MiB for s in r["stages"]}
        print(f"  {r['rank']:>4} {r['baseline_rss_bytes'] / MiB:9.1f}" + "".join(f"{row.get(x, float('nan')):10.1f}" for x in stages)
              + f"{r['peak_rss_bytes'] / MiB:10.1f}")
    print("  seconds (rank 0): " + ", ".join(f"{s['stage']} {s['seconds']:.2f}" for s in dist["stages"]))
    print(f"\nmax per-rank peak / single-process peak = {per_rank_peak / MiB:.1f} / "
          f"{single['peak_rss_bytes'] / MiB:.1f} MiB = {ratio:.3f}  (target at scale 22: <= 0.35)")
    base = max(r["baseline_rss_bytes"] for r in dist["per_rank"])
    print(f"without the import baseline (torch + gloo on the ranks): "
          f"{(per_rank_peak - base) / MiB:.1f} / {(single['peak_rss_bytes'] - single['baseline_rss_bytes']) / MiB:.1f}"
          f" MiB = {(per_rank_peak - base) / max(1, single['peak_rss_bytes'] - single['baseline_rss_bytes']):.3f}")
    print(f"plans byte-identical: {same}")
    out = {"scale": a.scale, "nprocs": a.nprocs, "k": k, "layout": a.layout, "chunks": a.chunks,
           "normalize": a.normalize, "n": single["n"], "nnz": single["nnz"],
           "single": single, "single_wall_s": t_single, "distributed": dist, "distributed_wall_s": t_dist,
           "ratio": ratio, "byte_identical": same}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    if not a.workdir:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    run(main)
