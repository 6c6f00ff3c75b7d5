#!/usr/bin/env python
"""Executor benchmark: graph × p × f × layout → sparsity-aware / oblivious / bare
exchange time, bytes, local SpMM, step, beside single-process scipy ``A @ H``.

Every row runs real processes (gloo by default; ``--backend nccl`` on GPUs)
through :func:`partplan.runtime.run_spmm`; times are medians over repeats of the
max over ranks (barrier before each collective), so ratios in one run compare
like with like. Usage::

    python benchmarks/bench_exec.py                         # email-Enron, p = 2, 4, f = 64
    python benchmarks/bench_exec.py --graphs email-Enron rmat14 --p 2 4 --f 16 64 --layouts 1d 2d
    python benchmarks/bench_exec.py --partition-dir DIR     # reuse DIR/<graph>-<p>.npy partitions
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from partplan.bench.script import run
from partplan.jobs.args import positive_int


def load(name: str):
    import partplan
    if name.startswith("rmat"):
        from partplan.datasets.generators import rmat
        return rmat(int(name[4:]), seed=1).normalize(symmetrize=True, self_loops="remove")
    return partplan.datasets.load(name)


def part_for(g, name, blocks, seed, pdir, how="mtkahypar"):
    if pdir is not None and (Path(pdir) / f"{name}-{blocks}.npy").is_file():
        return np.load(Path(pdir) / f"{name}-{blocks}.npy"), "file"
    if how == "block":
        return (np.arange(g.n) * blocks // g.n).astype(np.int64), "block"
    try:
        from partplan.partition.api import partition
        p = partition(g, blocks, model="hypergraph", seed=seed, stats=False)
        return p.part, "mtkahypar"
    except Exception:  # no engine here (e.g. a GPU image): contiguous blocks
        return (np.arange(g.n) * blocks // g.n).astype(np.int64), "block"


def scipy_time(g, f, dtype, repeat):
    A = g.to_scipy().astype(dtype)
    H = np.random.default_rng(0).standard_normal((g.n, f)).astype(dtype)
    A @ H
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        A @ H
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["email-Enron"])
    ap.add_argument("--p", nargs="+", type=positive_int, default=[2, 4])
    ap.add_argument("--f", nargs="+", type=positive_int, default=[64])
    ap.add_argument("--layouts", nargs="+", default=["1d"])
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeat", type=positive_int, default=9)
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument("--partition-dir")
    ap.add_argument("--partition", default="mtkahypar", choices=("mtkahypar", "block"),
                    help="block: contiguous row blocks (a high-volume case, where overlap has something to hide)")
    ap.add_argument("--overlap", default="on", choices=("on", "off"))
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    from partplan.layouts import parse_layout
    from partplan.plan import build_plan, write_plan
    from partplan.runtime.spmm import run_spmm
    rows = []
    head = (f"{'graph':<12} {'p':>2} {'f':>4} {'layout':<7} {'part':<9} {'aware MB':>9} {'obliv MB':>9} "
            f"{'aware ms':>9} {'obliv ms':>9} {'aw/obl':>7} {'bare ms':>8} {'ex/bare':>7} {'a-b ms':>7} "
            f"{'ex/a-b':>6} {'spmm ms':>8} {'step ms':>8} {'seq ms':>8} {'seq/ovl':>7} {'scipy ms':>9} {'bytes ok':>8}")
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.graphs:
            g = load(name)
            for p in a.p:
                for spec in a.layouts:
                    lay = parse_layout(spec, p)
                    part, how = part_for(g, name, lay.row_blocks, 0, a.partition_dir, a.partition)
                    path = write_plan(build_plan(g, part, p, layout=lay), Path(tmp) / f"{name}-{p}-{spec}.plan")
                    for f in a.f:
                        r = run_spmm(path, nprocs=p, backend=a.backend, f=f, dtype=a.dtype, repeat=a.repeat,
                                     compare=("oblivious", "bare"), threads=a.threads, timeout=120,
                                     overlap=a.overlap)
                        ref = scipy_time(g, f, a.dtype, a.repeat)
                        r.update(graph=name, partition=how, scipy_s=ref)
                        rows.append(r)
                        print(f"{name:<12} {p:>2} {f:>4} {lay.spec:<7} {how:<9} {r['bytes_measured'] / 1e6:>9.2f} "
                              f"{r['oblivious_bytes'] / 1e6:>9.2f} {r['exchange_s'] * 1e3:>9.3f} "
                              f"{r['oblivious_exchange_s'] * 1e3:>9.3f} {r['aware_over_oblivious_exchange']:>7.2f} "
                              f"{r['bare_a2a_s'] * 1e3:>8.3f} {r['exchange_over_bare']:>7.2f} "
                              f"{r.get('exchange_predicted_s', 0) * 1e3:>7.3f} {r.get('exchange_over_predicted', 0):>6.2f} "
                              f"{r['compute_s'] * 1e3:>8.3f} {r['step_s'] * 1e3:>8.3f} "
                              f"{r['step_sequential_s'] * 1e3:>8.3f} {r.get('overlap_speedup', 0):>7.2f} "
                              f"{ref * 1e3:>9.3f} {str(r['bytes_match']):>8}", flush=True)
    print("aw/obl = sparsity-aware / oblivious exchange time; ex/bare = executor exchange / bare "
          "all_to_all_single of the same splits, both timed after a step with a barrier before each call; "
          "a-b = alpha-beta prediction calibrated in the same job; step = as run (overlap " + a.overlap + "), "
          "seq = the same step in order, seq/ovl > 1: overlap helps; scipy = one-process A @ H")
    print("overlap split (exchange and compute as shares of the in-order phases):")
    for r in rows:
        tot = r["gather_s"] + r["exchange_s"] + r["compute_s"]
        if tot > 0:
            print(f"  {r['graph']:<12} p={r['ranks']} f={r['f']:<4} exchange {r['exchange_s'] / tot:5.1%}  "
                  f"compute {r['compute_s'] / tot:5.1%}  step with overlap / in order = "
                  f"{r['step_s'] / r['step_sequential_s']:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["bytes_match"] for r in rows) else 1


if __name__ == "__main__":
    run(main)
