#!/usr/bin/env python
"""Peak memory of one rank reading its rows of a feature file and writing its rows of an output
file: partplan's window-at-a-time row I/O (:mod:`partplan._rowio`) against numpy's memory map with
fancy indexing (the peer, ``np.load(mmap_mode="r")[ids]`` / ``open_memmap(...)[ids] = rows``),
each in a fresh process, measured in the same run.

A rank owns a random ``--share`` of the n rows (scattered ids, as a partition gives); the file is
``n × f`` float32. For each method the script prints the growth of the process's peak RSS
(``VmHWM``) over its RSS before the call, the bytes of the rows themselves, and the ratio of the
two methods' growths.

    python benchmarks/bench_rowio.py                         # n = 262,144, f = 512 (512 MiB), share 1/4
    python benchmarks/bench_rowio.py --n 100000 --f 128 --share 0.5 --json rowio.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from partplan.bench.script import run as run_script
from partplan.jobs.args import nonneg_int, positive_int

CHILD = r"""
import json, os, sys
import numpy as np

def hwm():
    return {l.split(':')[0]: int(l.split()[1]) * 1024 for l in open('/proc/self/status')
            if l.startswith(('VmHWM', 'VmRSS'))}

path, ids_path, method, op = sys.argv[1:5]
ids = np.load(ids_path)
H = np.load(path, mmap_mode="r")
n, f = H.shape
rows = np.ones((ids.size, f), np.float32) if op == "write" else None
del H
before = hwm()
if op == "read":
    if method == "numpy":
        out = np.ascontiguousarray(np.load(path, mmap_mode="r")[ids])
    else:
        from partplan._rowio import read_rows_at
        M = np.load(path, mmap_mode="r")
        off = int(M.offset)
        del M
        fd = os.open(path, os.O_RDONLY)
        out = read_rows_at(fd, off, (n, f), np.float32, ids)
        os.close(fd)
    check = float(out[:, 0].sum())
else:
    if method == "numpy":
        Z = np.lib.format.open_memmap(path, mode="r+")
        Z[ids] = rows
        Z.flush()
        del Z
    else:
        from partplan._rowio import write_rows_at
        M = np.load(path, mmap_mode="r")
        off = int(M.offset)
        del M
        with open(path, "r+b") as fh:
            write_rows_at(fh, off, (n, f), np.float32, ids, rows)
    check = 0.0
after = hwm()
print(json.dumps({"growth": max(0, after["VmHWM"] - before["VmRSS"]), "check": check}))
"""


def run(path: Path, ids_path: Path, method: str, op: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(ids_path), method, op], capture_output=True,
                       text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{method} {op} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=positive_int, default=262_144, help="rows of the file (default 262,144)")
    ap.add_argument("--f", type=positive_int, default=512, help="float32 values per row (default 512)")
    ap.add_argument("--share", type=float, default=0.25, help="the rank's share of the rows (default 0.25)")
    ap.add_argument("--seed", type=nonneg_int, default=0)
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)
    if args.n < 1 or args.f < 1 or not 0 < args.share <= 1:
        ap.error("--n and --f must be >= 1 and --share in (0, 1]")
    rng = np.random.default_rng(args.seed)
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-rowio-") as d:
        H = Path(d) / "H.npy"
        M = np.lib.format.open_memmap(H, mode="w+", dtype=np.float32, shape=(args.n, args.f))
        for lo in range(0, args.n, 16384):     # written in blocks: the script itself stays small
            M[lo:lo + 16384] = rng.standard_normal((min(16384, args.n - lo), args.f), dtype=np.float32)
        M.flush()
        del M
        ids = np.sort(rng.permutation(args.n)[:int(args.share * args.n)]).astype(np.int64)
        ids_path = Path(d) / "ids.npy"
        np.save(ids_path, ids)
        rows_mib = ids.size * args.f * 4 / 2**20
        print(f"file {args.n} x {args.f} float32 ({args.n * args.f * 4 / 2**20:.0f} MiB), the rank's rows "
              f"{ids.size} ({rows_mib:.0f} MiB), scattered")
        print(f"{'op':<6} {'numpy mmap MiB':>15} {'partplan MiB':>13} {'ratio':>7}")
        for op in ("read", "write"):
            a, b = run(H, ids_path, "numpy", op), run(H, ids_path, "partplan", op)
            if op == "read" and abs(a["check"] - b["check"]) > 1e-3 * max(1.0, abs(a["check"])):
                raise SystemExit("the two reads disagree")
            row = {"op": op, "n": args.n, "f": args.f, "rows": int(ids.size), "rows_mib": rows_mib,
                   "numpy_growth_mib": a["growth"] / 2**20, "partplan_growth_mib": b["growth"] / 2**20}
            row["ratio"] = row["partplan_growth_mib"] / max(row["numpy_growth_mib"], 1e-9)
            out.append(row)
            print(f"{op:<6} {row['numpy_growth_mib']:>15.0f} {row['partplan_growth_mib']:>13.0f} {row['ratio']:>7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_script(main)
