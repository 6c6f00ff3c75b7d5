"""Scale target: METIS + plan of R-MAT SCALE at k ranks within the
machine's memory. Generates the graph (bench_refine.rmat_graph), partitions
it with METIS on the graph's own CSR (bench_refine.lean_metis: no symmetrized
copy), builds and writes the plan; prints seconds per stage and the peak RSS.

    /usr/bin/time -v python benchmarks/scale_metis_plan.py --scale 22 -k 64
"""
import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_refine import lean_metis, rmat_graph  # noqa: E402

from partplan.plan import build_plan, write_plan  # noqa: E402
from partplan.bench.script import add_json_option, check_json_output, run, write_json  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=positive_int, default=22)
    ap.add_argument("-k", type=positive_int, default=64)
    add_json_option(ap)
    args = ap.parse_args(argv)
    check_json_output(args.json)
    row = {}
    t = time.perf_counter()
    g = rmat_graph(args.scale)
    row.update(graph=f"rmat{args.scale}", n=g.n, nnz=g.nnz, k=args.k, gen_s=time.perf_counter() - t,
               gen_rss_gib=peak_rss_gib())
    t = time.perf_counter()
    part = lean_metis(g, args.k)
    row.update(metis_s=time.perf_counter() - t, metis_rss_gib=peak_rss_gib())
    t = time.perf_counter()
    plan = build_plan(g, part, args.k)
    row["build_plan_s"] = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        write_plan(plan, Path(d) / "g.plan")
        row["write_plan_s"] = time.perf_counter() - t
    row.update(total_volume=int(plan.manifest["stats"]["total_volume"]), peak_rss_gib=peak_rss_gib())
    print(json.dumps(row, indent=1))
    write_json(args.json, row, argv)
    return 0


if __name__ == "__main__":
    run(main)
