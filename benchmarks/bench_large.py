"""The default pipeline on a large graph with and without its large-graph schedule, against
METIS in the same process (wall and CPU seconds; run METIS before and after, ratios to the mean).

  python benchmarks/bench_large.py webcrawl-150k -k 16 64
  python benchmarks/bench_large.py rmat16 --progress          # the stage lines of the default

"full" is the pipeline with ``pipeline.LARGE_PINS`` raised above the graph (every start V-cycled and
refined, 8 work units per pin, three refine/volume cycles); "default" is ``partition(g, k)``'s
pipeline as it is. Graph names: the family benchmark's web crawls, its synthetic graphs
(bench_refine.SYNTHETIC) or registered datasets.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from partplan.bench.script import add_json_option, check_json_output, run, write_json  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def _load(name: str):
    from bench_families import WEB, web_graph
    from bench_refine import load_instance

    return web_graph(name) if name in WEB else load_instance(name)


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("-k", type=positive_int, nargs="+", default=[64])
    ap.add_argument("--progress", action="store_true", help="print the default's stage lines")
    add_json_option(ap)
    a = ap.parse_args(argv)
    check_json_output(a.json)
    out = []
    from partplan.partition.pipeline import auto as pipeline
    from partplan.partition.engines import run_backend

    g = _load(a.graph)
    if g is None:
        return 2
    print(f"# {a.graph}: {g.n} rows, {g.nnz} nonzeros, large = {pipeline.is_large(g)} (shared machine: ratios only)")
    large = pipeline.LARGE_PINS
    for k in a.k:
        metis = [_timed(lambda k=k: run_backend("metis", g, k, imbalance=0.03, seed=0, graph=g))]
        rows = {}
        for name, limit in (("full", 10 ** 18), ("default", large)):
            pipeline.LARGE_PINS = limit
            say = (lambda m: print(f"  {m}", flush=True)) if a.progress and name == "default" else None
            (part, _), w, c = _timed(lambda k=k, say=say: pipeline.auto_partition(g, k, progress=say))
            rows[name] = (w, c, pipeline.figures(g, part, k))
        pipeline.LARGE_PINS = large
        metis.append(_timed(lambda k=k: run_backend("metis", g, k, imbalance=0.03, seed=0, graph=g)))
        mw = sum(m[1] for m in metis) / 2
        mc = sum(m[2] for m in metis) / 2
        print(f"k={k} METIS wall {metis[0][1]:.1f}/{metis[1][1]:.1f} s, CPU {metis[0][2]:.1f}/{metis[1][2]:.1f} s")
        for name, (w, c, f) in rows.items():
            print(f"k={k} {name}: wall {w:.1f} s ({w / mw:.2f} x METIS), CPU {c:.1f} s ({c / mc:.2f} x METIS), "
                  f"max(send, recv) {f['max_send_recv']}, total volume {f['total_volume']}", flush=True)
            out.append({"graph": a.graph, "k": k, "schedule": name, "wall_s": w, "cpu_s": c, "wall_x_metis": w / mw,
                        "cpu_x_metis": c / mc, "max_send_recv": f["max_send_recv"],
                        "total_volume": f["total_volume"]})
    write_json(a.json, {"n": g.n, "nnz": g.nnz, "rows": out}, argv)
    return 0


if __name__ == "__main__":
    run(main)
