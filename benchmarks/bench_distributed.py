#!/usr/bin/env python
"""The distributed partitioner (``partition --nprocs N``) against the
single-process default and the hash partition, on R-MAT graphs that fit.

For each scale: generate the chunked R-MAT, run every MPI engine (+ the
distributed bottleneck refinement) with N processes, run the default
pipeline (``partplan.partition.api.partition``) in this process, and count
the hash partition ``v mod k``. Every figure is recounted by
:func:`partplan.metrics.stats.analyze` (the exact 1D volumes) from the written
partition. Prints ratios to the default and to hash, and each process's peak RSS
(``peak_rss_mib_per_process``, the largest as ``peak_rss_mib``); ``--json`` keeps the rows.

``--graphs DIR ...`` takes existing chunked graphs and ``--datasets NAME ...``
registered real graphs (``partplan datasets list``; written as chunks first)
instead of generating R-MAT ones; the engine ``default`` runs what
``--nprocs`` without ``--engine`` runs (the row names the engine it chose),
and each row says its ratios to the ``stream`` row when that engine ran; ``--chunk-recount`` recounts every figure in one pass over the
chunks (``scale_e2e.column_net_stats``) instead of loading the graph, for
graphs that do not fit one process (use it with ``--no-default``).

The settings were chosen on R-MAT 16 seed 0, 19 seed 1 and 21 seed 0
(k = 64); report other scales or seeds.

    python benchmarks/bench_distributed.py --scales 18 20 --k 64 --nprocs 2 --json dist.json
    python benchmarks/bench_distributed.py --scales 14 --datasets email-Enron --k 16 \
        --engines default stream --json default-vs-stream.json
    python benchmarks/bench_distributed.py --graphs rmat24.chunked --k 64 --engines stream \
        --no-default --chunk-recount
    python benchmarks/bench_distributed.py --scales --half held-out --k 16 --engines default zoltan stream

``--half tune|held-out`` runs one half of ``bench_engine_rule.SPLIT`` (a graph of each family,
a generated web crawl on each side) and ``--specs`` any graph named that way. ``--refine
KEY=VALUE`` sets a knob of the distributed refinement for every MPI run: R-MAT 20 on both sides
of the whole-graph bound (docs/design/distributed.md, "Graphs that fit"):

    python benchmarks/bench_distributed.py --scales 20 --k 64 --engines default --no-default
    python benchmarks/bench_distributed.py --scales 20 --k 64 --engines default --no-default \
        --refine gather_max_pins=67108864
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))   # scale_e2e (the chunk recount)

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="*", default=[18], help="R-MAT scales (none: only --datasets)")
    ap.add_argument("--k", type=positive_int, default=64)
    ap.add_argument("--nprocs", type=positive_int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engines", nargs="+", default=["zoltan", "ptscotch"])
    ap.add_argument("--no-default", action="store_true", help="skip the single-process default")
    ap.add_argument("--graphs", nargs="+", default=None, help="existing chunked graphs (instead of --scales)")
    ap.add_argument("--datasets", nargs="+", default=None,
                    help="registered real graphs (partplan datasets), run after --scales / --graphs")
    ap.add_argument("--specs", nargs="+", default=None,
                    help="graphs named as bench_engine_rule.py names them: ds:NAME, rmat:SCALE:SEED, web:N:SEED "
                         "(a generated web crawl, datasets.web_crawl)")
    ap.add_argument("--half", choices=("tune", "held-out"), default=None,
                    help="the graphs of one half of bench_engine_rule.SPLIT (each family, web crawls included)")
    ap.add_argument("--chunk-recount", action="store_true",
                    help="recount in one pass over the chunks (never the whole graph in memory)")
    ap.add_argument("--refine", action="append", default=[], metavar="KEY=VALUE",
                    help="a DistributedRefineContext knob for every MPI run (bench_distributed_refine.py's "
                         "parser), e.g. gather_max_pins=0 for the distributed rounds on a graph that fits")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    from bench_distributed_refine import parse_refine
    knobs = parse_refine(a.refine)
    if a.chunk_recount and not a.no_default:
        ap.error("--chunk-recount needs --no-default (the single-process default loads the whole graph)")
    from partplan.partition.engines import DEFAULT_MPI_ENGINE, mpi_engine_names
    for eng in a.engines:
        if eng != "default" and eng not in (*mpi_engine_names(), DEFAULT_MPI_ENGINE):
            ap.error(f"argument --engines: {eng!r} does not run distributed; use default or one of "
                     f"{', '.join(mpi_engine_names())}")

    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.io.chunked import chunk_info, read_chunked
    from partplan.metrics.stats import analyze
    from partplan.partition.api import partition
    from partplan.partition.context import DistributedRefineContext
    from partplan.partition.pipeline.distributed import distributed_partition

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-dist-") as d:
        from partplan.datasets import load_graph
        from partplan.io.chunked import write_chunked
        specs = list(a.specs or [])
        if a.half:
            from bench_engine_rule import SPLIT
            specs += SPLIT[a.half]
        for scale in (a.graphs or a.scales) + (a.datasets or []) + specs:
            if scale in specs:
                from bench_engine_rule import load as load_spec
                path = write_chunked(load_spec(scale), Path(d) / f"{scale.replace(':', '_')}.chunked",
                                     chunks=8 * a.nprocs)
            elif a.datasets and scale in a.datasets:
                path = write_chunked(load_graph(scale), Path(d) / f"{scale}.chunked", chunks=8 * a.nprocs)
            elif a.graphs:
                path = Path(scale)
            else:
                path = Path(d) / f"rmat{scale}.chunked"
                rmat_chunked(scale, seed=a.seed, path=path, chunks=8 * a.nprocs)
            n = chunk_info(path).n
            g = None if a.chunk_recount else read_chunked(path)

            def summary(part):
                if g is not None:
                    return analyze(g, part, a.k).summary()
                from scale_e2e import column_net_stats
                return column_net_stats(path, {"p": np.asarray(part, np.int64)}, a.k)["p"]

            def fig(part, name, wall):
                s = summary(part)
                row = {"scale": scale, "method": name, "total": s["total_volume"], "max_send": s["max_send"],
                       "max_recv": s["max_recv"], "max": max(s["max_send"], s["max_recv"]),
                       "imbalance": round(s["compute_imbalance"], 4), "wall_s": round(wall, 1)}
                rows.append(row)
                return row

            hash_row = fig((np.arange(n) % a.k).astype(np.int64), "hash", 0.0)
            ref = None
            if not a.no_default:
                t = time.perf_counter()
                ref = fig(partition(g, a.k).part, "default (1 process)", time.perf_counter() - t)
            for eng in a.engines:
                out = Path(d) / f"{eng}.npy"
                t = time.perf_counter()
                res = distributed_partition(path, a.k, nprocs=a.nprocs, output=out,
                                            engine=None if eng == "default" else eng, seed=0, quiet=True,
                                            context=DistributedRefineContext(**knobs))
                wall = time.perf_counter() - t
                name = f"default={res['engine']}" if eng == "default" else eng
                row = fig(np.load(out), f"{name}+refine+passes (N={a.nprocs})", wall)
                row["engine"] = eng
                assert row["total"] == res["result"]["total_volume"] and row["max_send"] == res["result"]["max_send"]
                e = res["engine_result"]
                row.update(engine_total=e["total_volume"], engine_max=max(e["max_send"], e["max_recv"]),
                           refine_knobs=knobs, refine=res["refine"], gathered=res.get("gathered"), km1=res["km1"],
                           stages={k: max(s[k]["wall_s"] for s in res["stages"]) for k in res["stages"][0]},
                           peak_rss_mib_per_process=[max(v["peak_rss_bytes"] for v in s.values()) >> 20
                                                     for s in res["stages"]])
                row["peak_rss_mib"] = max(row["peak_rss_mib_per_process"])
            stream = next((r for r in rows if r["scale"] == scale and r.get("engine") == "stream"), None)
            for row in rows:
                if row["scale"] != scale:
                    continue
                row["max/hash"] = round(row["max"] / hash_row["max"], 3)
                row["total/hash"] = round(row["total"] / hash_row["total"], 3)
                if stream and "engine" in row:
                    row["max/stream"] = round(row["max"] / stream["max"], 3)
                    row["total/stream"] = round(row["total"] / stream["total"], 3)
                if ref:
                    row["max/default"] = round(row["max"] / ref["max"], 3)
                    row["total/default"] = round(row["total"] / ref["total"], 3)
                print(json.dumps(row), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    run(main)
