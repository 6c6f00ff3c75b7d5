#!/usr/bin/env python
"""Cost of the per-rank shard checks on loading (goal ≤ 10 % of the read).

Graph: Graph500 R-MAT (default scale 18, edgefactor 16), symmetrized; a
balanced random partition into p = 4 ranks (every rank talks to every rank:
the largest halo and count arrays). The plan is written once to a temporary
folder; then, for each rank, best of ``--repeat`` runs on one thread, with the
shard in the page cache (as on the second read of a job):

- ``read``   — :func:`partplan.plan.store.load_rank` with ``check=False``:
  open without following links, memory-map, sha256 of the mapped bytes,
  Arrow parse, manifest-vs-shard field checks (what a reader did before);
- ``check``  — :func:`partplan.io.trust.shard_problems` on that shard (array
  types, ids in [0, n), counts against the pairs, buffer bounds, each step's
  structure check) — what ``load_rank`` adds by default;
- ``read_nosha`` — the read with ``verify=False`` (no checksum: the checks are
  then a larger share; reported for completeness).

ratio = check / read (goal ≤ 0.10). Figures vary ±30 % on a shared 2-core box.

Run: ``python benchmarks/bench_trust.py [--scale 18] [--p 4] [--repeat 5] [--json]``.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def _best(fn, repeat: int) -> float:
    """Best wall seconds of ``repeat`` calls of ``fn``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--edgefactor", type=int, default=16)
    ap.add_argument("--p", type=positive_int, default=4)
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from partplan.datasets.generators import rmat
    from partplan.plan import build_plan, read_manifest, write_plan
    from partplan.plan.store import load_rank
    from partplan.program.checks import shard_problems

    t0 = time.perf_counter()
    g = rmat(args.scale, args.edgefactor, seed=0)
    part = np.random.default_rng(0).integers(0, args.p, g.n)
    with tempfile.TemporaryDirectory() as d:
        path = write_plan(build_plan(g, part, args.p), Path(d) / "bench.plan")
        setup_s = time.perf_counter() - t0
        m = read_manifest(path)
        rows = []
        for r in range(args.p):
            load_rank(path, r, manifest=m, check=False)  # warm the page cache
            read = _best(lambda: load_rank(path, r, manifest=m, check=False), args.repeat)
            nosha = _best(lambda: load_rank(path, r, manifest=m, check=False, verify=False), args.repeat)
            rp = load_rank(path, r, manifest=m, check=False)
            assert not shard_problems(m, rp)
            check = _best(lambda: shard_problems(m, rp), args.repeat)
            size = (path / f"rank-{r:05d}.arrow").stat().st_size
            rows.append({"rank": r, "shard_bytes": size, "read_s": read, "read_nosha_s": nosha, "check_s": check,
                         "ratio": check / read, "ratio_nosha": check / nosha})
    rep = {"scale": args.scale, "n": g.n, "nnz": g.nnz, "p": args.p, "setup_s": setup_s, "ranks": rows,
           "ratio_max": max(x["ratio"] for x in rows),
           "ratio_total": sum(x["check_s"] for x in rows) / sum(x["read_s"] for x in rows)}
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print(f"R-MAT scale {args.scale}: n={g.n} nnz={g.nnz}, p={args.p} (setup {setup_s:.1f} s)")
        print(f"{'rank':>4} {'MiB':>7} {'read ms':>8} {'no-sha ms':>9} {'check ms':>8} {'check/read':>10} "
              f"{'check/no-sha':>12}")
        for x in rows:
            print(f"{x['rank']:>4} {x['shard_bytes'] / 2**20:>7.1f} {1e3 * x['read_s']:>8.2f} "
                  f"{1e3 * x['read_nosha_s']:>9.2f} {1e3 * x['check_s']:>8.2f} {x['ratio']:>10.3f} "
                  f"{x['ratio_nosha']:>12.2f}")
        print(f"check / read: {rep['ratio_total']:.3f} overall, {rep['ratio_max']:.3f} worst rank (goal <= 0.10)")
    return 0


if __name__ == "__main__":
    run(main)
