#!/usr/bin/env python
"""The distributed refinement's knobs (``partplan.partition.context.DistributedRefineContext``)
measured against the single-process default, on the TUNE / HELD-OUT split of
``bench_engine_rule.py`` (its SPLIT and graph loading).

Per graph and k: write the graph as chunks, run the engine the ``--nprocs``
rule picks (``partplan.partition.pipeline.distributed.default_engine``) with N
processes and the refinement context built from ``--refine KEY=VALUE``
options (the others at their defaults), then partplan's volume passes. Every
figure is recounted by :func:`partplan.metrics.stats.analyze` from the written
partition and divided by the single-process default's (``partition(g, k)``).

The default's figures do not depend on the knobs: ``--defaults FILE`` keeps them
(one JSON line per (graph, k)); a case missing there is read from
``--defaults-from`` (the engine-rule table's rows, when given) or measured.
``--cache FILE`` keeps one JSON line per (config, graph, k) so a sweep can resume;
``--report-only`` summarizes the cached configs without running.

    python benchmarks/bench_distributed_refine.py --half tune --label base \
        --defaults refine-defaults.jsonl --defaults-from docs/results/2026-11-29-engine-rule.json \
        --cache refine-sweep.jsonl
    python benchmarks/bench_distributed_refine.py --half tune --label theta09 --refine theta=0.9 \
        --defaults refine-defaults.jsonl --cache refine-sweep.jsonl
    python benchmarks/bench_distributed_refine.py --report-only --cache refine-sweep.jsonl \
        --json docs/results/2026-11-29-distributed-refine.json

Every graph of the split has fewer than ``gather_max_pins`` (2²⁴) pins (nonzeros + rows), so by default
it is held whole: process 0 refines the engine's partition with the single-process pipeline's
refinement, process 1 runs the single-process default pipeline, the better is kept (the engine's
alone: ``--refine gather_pipeline=0``); the distributed rounds
that larger graphs get are ``--refine gather_max_pins=0``. The refinement before its
coordinated moves is ``--refine coordinated_phases=0``; the
whole-cluster moves are ``--refine cluster_levels=8`` (docs/design/distributed.md, "Coordinated
moves"). ``--graphs`` and ``--ks`` restrict a quick run to some cases of the half.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine_rule import SPLIT, family, load, read_json_lines  # noqa: E402

from partplan.bench.script import run  # noqa: E402
from partplan.errors import OptionError  # noqa: E402
from partplan.jobs.args import positive_float, positive_int  # noqa: E402


def parse_refine(items: list[str]) -> dict:
    from partplan.partition.context import DistributedRefineContext
    types = {f.name: f.type for f in dataclasses.fields(DistributedRefineContext)}
    out = {}
    for it in items:
        key, _, val = it.partition("=")
        if key not in types or key in ("seed", "time_limit"):
            raise SystemExit(f"--refine {it}: not a DistributedRefineContext knob ({', '.join(types)})")
        t = str(types[key])
        out[key] = int(val) if t.startswith("int") else val if t.startswith("str") else float(val)
    return out


def figures(g, part, k: int, wall: float) -> dict:
    from partplan.metrics.stats import analyze
    s = analyze(g, part, k).summary()
    return {"max": max(s["max_send"], s["max_recv"]), "total": s["total_volume"],
            "imbalance": round(s["compute_imbalance"], 4), "wall_s": round(wall, 1)}


def seeded_defaults(path: str | None) -> dict:
    """(graph, k, nprocs) -> the default's figures, from an engine-rule table's rows."""
    if not path or not Path(path).exists():
        return {}
    try:
        d = json.loads(Path(path).read_text())
        return {(r["graph"], r["k"], r["nprocs"]): r["default"] for rows in d["rows"].values() for r in rows}
    except json.JSONDecodeError as exc:
        raise OptionError(f"--defaults-from {path}: not JSON ({exc}); give bench_engine_rule.py's --json table") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise OptionError(f"--defaults-from {path}: not an engine-rule table (bench_engine_rule.py --json): "
                          f"no {exc}") from None


def run_case(spec: str, k: int, nprocs: int, knobs: dict, d: Path, default: dict | None,
             timeout_s: float) -> dict:
    from partplan.io.chunked import write_chunked
    from partplan.partition.api import partition
    from partplan.partition.context import DistributedRefineContext
    from partplan.partition.pipeline.distributed import default_engine, distributed_partition
    from partplan.partition.pipeline.engine_rule import graph_stats

    g = load(spec)
    path = write_chunked(g, d / f"{spec.replace(':', '_')}-{k}.chunked", chunks=8 * nprocs)
    row = {"graph": spec, "family": family(spec), "k": k, "nprocs": nprocs, "refine_knobs": knobs}
    if default is None:
        t = time.perf_counter()
        default = figures(g, partition(g, k).part, k, time.perf_counter() - t)
    row["default"] = default
    eng, reason = default_engine(graph_stats(path, k))
    row["engine"], row["reason"] = eng, reason
    out = d / "part.npy"
    ctx = DistributedRefineContext(**knobs, seed=0)
    err = io.StringIO()
    t = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err):   # the worker's "refine round i" lines (every 10th round)
            res = distributed_partition(path, k, nprocs=nprocs, output=out, engine=eng, seed=0, context=ctx,
                                        quiet=False, timeout_s=timeout_s)
    except Exception as e:   # noqa: BLE001 - a failed run is a row, not the end of the sweep
        row["mpi"] = {"error": f"{type(e).__name__}: {e}"[:300], "wall_s": round(time.perf_counter() - t, 1)}
        return row
    r = figures(g, np.load(out), k, time.perf_counter() - t)
    e = res["engine_result"]
    r["engine_max"], r["engine_total"] = max(e["max_send"], e["max_recv"]), e["total_volume"]
    r["stages_s"] = {kk: max(s[kk]["wall_s"] for s in res["stages"]) for kk in res["stages"][0]}
    r["refine"] = res["refine"]
    r["refine"]["max_after"] = max(res["refine"]["max_send"], res["refine"]["max_recv"])
    r["gathered"] = res.get("gathered")   # the whole-graph refinement in process 0 (small graphs), or why not
    km1 = res.get("km1")
    r["km1"] = {kk: km1[kk] for kk in ("volume_after", "max_load_after") if kk in km1} if isinstance(km1, dict) \
        else str(km1)
    r["trace"] = [[int(a), int(b), int(c), int(dd)] for a, b, c, dd in
                  re.findall(r"refine round (\d+): moved (\d+), max\(send, recv\) (\d+), total (\d+)", err.getvalue())]
    r["max/default"] = round(r["max"] / max(default["max"], 1), 3)
    r["total/default"] = round(r["total"] / max(default["total"], 1), 3)
    row["mpi"] = r
    out.unlink(missing_ok=True)
    Path(str(out) + ".json").unlink(missing_ok=True)
    return row


def geo(xs) -> float:
    return round(math.exp(float(np.mean([math.log(x) for x in xs]))), 3)


def _refine_s(m: dict) -> float:
    """Seconds of the refinement: the rounds, and the whole-graph refinement where it ran."""
    return m["stages_s"]["refine"] + m["stages_s"].get("gathered", 0.0)


def _refined_max(m: dict) -> int:
    g = m.get("gathered")
    return g["max_after"] if isinstance(g, dict) else m["refine"]["max_after"]


def summarize(rows: list[dict]) -> dict:
    ok = [r for r in rows if "error" not in r["mpi"]]
    if not ok:
        return {"cases": 0}
    mx = [r["mpi"]["max/default"] for r in ok]
    tot = [r["mpi"]["total/default"] for r in ok]
    worst = [max(a, b) for a, b in zip(mx, tot)]
    return {"cases": len(ok), "failed": len(rows) - len(ok), "max_geomean": geo(mx), "total_geomean": geo(tot),
            "worst": round(max(worst), 3), "cases_within_1.05": sum(w <= 1.05 for w in worst),
            "cases_above_1.15": sum(w > 1.15 for w in worst),
            "wall_s_sum": round(sum(r["mpi"]["wall_s"] for r in ok), 1),
            "refine_s_sum": round(sum(_refine_s(r["mpi"]) for r in ok), 1),
            "default_wall_s_sum": round(sum(r["default"]["wall_s"] for r in ok), 1)}


def report(cache: dict) -> dict:
    by: dict = {}
    for (label, half, _, _), r in cache.items():
        by.setdefault((label, half), []).append(r)
    out = {}
    for (label, half), rows in by.items():
        rows.sort(key=lambda r: (SPLIT.get(half, []).index(r["graph"]) if r["graph"] in SPLIT.get(half, []) else 99,
                                 r["k"]))
        print(f"\n== {label} on {half}: refine {rows[0]['refine_knobs'] or 'defaults'} ==")
        print(f"{'graph':22s} {'k':>3s} {'engine':8s}  max/def  tot/def  wall   refine_s rounds moved  "
              f"engine max -> refined max -> after passes")
        for r in rows:
            m = r["mpi"]
            if "error" in m:
                print(f"{r['graph']:22s} {r['k']:3d} failed: {m['error']}")
                continue
            print(f"{r['graph']:22s} {r['k']:3d} {r['engine']:8s}  {m['max/default']:7.3f}  {m['total/default']:7.3f}"
                  f" {m['wall_s']:6.1f} {_refine_s(m):8.1f} {m['refine']['rounds']:6d} "
                  f"{m['refine']['moved']:6d}  {m['engine_max']} -> {_refined_max(m)} -> {m['max']} "
                  f"(default {r['default']['max']})")
        s = summarize(rows)
        print(f"{label} on {half}: {s}")
        out.setdefault(label, {"refine": rows[0]["refine_knobs"], "halves": {}})["halves"][half] = \
            {"summary": s, "rows": rows}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--half", choices=["tune", "held-out", "both"], default="tune")
    ap.add_argument("--ks", type=positive_int, nargs="+", default=[16, 64])
    ap.add_argument("--nprocs", type=positive_int, default=2)
    ap.add_argument("--graphs", nargs="+", default=None, help="only these specs of the half")
    ap.add_argument("--refine", action="append", default=[], metavar="KEY=VALUE",
                    help="a DistributedRefineContext knob (repeatable); the others keep their defaults")
    ap.add_argument("--label", default=None, help="the config's name in the cache and the table")
    ap.add_argument("--timeout", type=positive_float, default=600.0, help="per MPI run (s)")
    ap.add_argument("--defaults", default=None, help="JSON lines: the single-process default's figures")
    ap.add_argument("--defaults-from", default=None, help="an engine-rule table whose rows hold the default's")
    ap.add_argument("--cache", default=None, help="JSON lines: one per (config, graph, k)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    knobs = parse_refine(a.refine)
    label = a.label or (",".join(f"{k}={v}" for k, v in sorted(knobs.items())) or "defaults")
    cache: dict = {}
    if a.cache and Path(a.cache).exists():
        for r in read_json_lines(a.cache, "--cache", ("label", "half", "graph", "k")):
            cache[(r["label"], r["half"], r["graph"], r["k"])] = r
    defaults = seeded_defaults(a.defaults_from)
    if a.defaults and Path(a.defaults).exists():
        for r in read_json_lines(a.defaults, "--defaults", ("graph", "k", "nprocs", "default")):
            defaults[(r["graph"], r["k"], r["nprocs"])] = r["default"]
    if not a.report_only:
        halves = ["tune", "held-out"] if a.half == "both" else [a.half]
        with tempfile.TemporaryDirectory(prefix="bench-refine-") as d:
            for half in halves:
                for spec in [s for s in SPLIT[half] if not a.graphs or s in a.graphs]:
                    for k in a.ks:
                        if (label, half, spec, k) in cache:
                            continue
                        print(f"{label}: {spec} k={k} ...", file=sys.stderr, flush=True)
                        had = (spec, k, a.nprocs) in defaults
                        r = run_case(spec, k, a.nprocs, knobs, Path(d), defaults.get((spec, k, a.nprocs)),
                                     a.timeout)
                        r.update(label=label, half=half)
                        cache[(label, half, spec, k)] = r
                        if not had and a.defaults:
                            defaults[(spec, k, a.nprocs)] = r["default"]
                            with open(a.defaults, "a") as f:
                                f.write(json.dumps({"graph": spec, "k": k, "nprocs": a.nprocs,
                                                    "default": r["default"]}) + "\n")
                        if a.cache:
                            with open(a.cache, "a") as f:
                                f.write(json.dumps(r) + "\n")
    out = {"split": SPLIT, "nprocs": a.nprocs, "ks": a.ks, "configs": report(cache)}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
