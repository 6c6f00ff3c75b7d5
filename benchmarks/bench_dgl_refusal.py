"""Peak RSS (VmHWM) of refusing hostile DGL assignment texts (partition_meta.json + _N.txt), each in a
fresh interpreter: valid ids up to MB MiB, then a part id >= num_parts, a word, or a count that
disagrees with the graph. Reported against the goal of 2 x the file + 200 MiB.

Usage: python benchmarks/bench_dgl_refusal.py DIR [MB] [--json FILE]   (MB default 1024; DIR gets the files)
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

from partplan.bench.script import add_json_option, check_json_output, run, write_json

_ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
_ap.add_argument("dir", help="a folder for the test files (about 4 x MB MiB)")
_ap.add_argument("mb", nargs="?", type=int, default=1024, help="MiB of valid ids before the fault (1024)")
add_json_option(_ap)
_args = _ap.parse_args()
if _args.mb < 1:
    _ap.error("MB must be >= 1")
root = Path(_args.dir)
mb = _args.mb
CHILD = r'''
import sys, time
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
from partplan.errors import PartplanError
import pyarrow.csv, numpy
base = hwm()
t0 = time.perf_counter()
n = None if sys.argv[2] == "-" else int(sys.argv[2])
try:
    from partplan.io.foreign import read_dgl_assignment
    read_dgl_assignment(sys.argv[1], n)
    out = "accepted"
except PartplanError as e:
    out = str(e)
peak = hwm()
print(repr(out[:160])); print(base, peak, time.perf_counter() - t0)
'''
unit = b"0\n1\n2\n3\n" * (1 << 17)   # 1 MiB
cases = {"id-too-large-at-end": (b"7\n", "-"), "garbage-at-end": (b"x\n", "-"),
         "count-vs-graph": (b"", "5"), "count-vs-graph-at-end": (b"", str(mb * (1 << 20) // 2 + 1))}
def main() -> None:
    check_json_output(_args.json)
    rows = []
    for name, (tail, n) in cases.items():
        d = root / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "partition_meta.json").write_text(json.dumps({"num_parts": 4}))
        with open(d / "_N.txt", "wb") as fh:
            for _ in range(mb):
                fh.write(unit)
            fh.write(tail)
        size = (d / "_N.txt").stat().st_size
        r = subprocess.run([sys.executable, "-c", CHILD, str(d), n], capture_output=True, text=True)
        msg, nums = r.stdout.strip().splitlines()[-2:]
        base, peak, wall = nums.split()
        peak_b, base_b = int(peak) * 1024, int(base) * 1024
        print(f"{name}: file {size / 2**20:.0f} MiB; {msg}; peak RSS {peak_b / 2**20:.0f} MiB (after imports "
              f"{base_b / 2**20:.0f} MiB, +{(peak_b - base_b) / 2**20:.0f} MiB); bound 2 x file + 200 MiB = "
              f"{(2 * size + (200 << 20)) / 2**20:.0f} MiB; {float(wall):.1f} s")
        rows.append({"case": name, "file_bytes": size, "message": msg, "peak_rss_bytes": peak_b,
                     "after_imports_bytes": base_b, "bound_bytes": 2 * size + (200 << 20), "wall_s": float(wall)})
        (d / "_N.txt").unlink()
    write_json(_args.json, {"mb": mb, "rows": rows})


if __name__ == "__main__":
    run(main)
