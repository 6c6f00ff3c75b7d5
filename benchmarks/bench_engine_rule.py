#!/usr/bin/env python
"""The per-graph engine rule of ``--nprocs`` (partplan.partition.pipeline.engine_rule)
measured against the single-process default, on a TUNE half and a HELD-OUT half.

For each graph and k: write it as chunks, read the rule's figures from the
chunks (``graph_stats``), run the single-process default
(``partplan.partition.api.partition``, what ``partplan partition G -k K`` runs)
and every MPI engine (zoltan, ptscotch, stream; each followed by partplan's
distributed refinement and volume passes) with N processes. Every figure is
recounted by :func:`partplan.metrics.stats.analyze` from the written partition.
Prints, per case, max(send, recv) and total volume of each engine divided by
the default's, the wall times, the rule's choice; then a summary per half.

The split was fixed before any run (SPLIT below). ``--cache FILE`` keeps one
JSON line per (graph, k) and skips cases already there, so a run can resume;
``--rule-only`` re-applies the rule to the cached rows without running.

    python benchmarks/bench_engine_rule.py --cache engine-rule.jsonl \
        --json docs/results/2026-11-29-engine-rule.json
    python benchmarks/bench_engine_rule.py --half held-out --ks 16
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partplan.bench.script import run  # noqa: E402
from partplan.errors import OptionError  # noqa: E402
from partplan.jobs.args import positive_float, positive_int  # noqa: E402
from partplan.partition.engines import RULE_ENGINES  # noqa: E402

# Fixed before measuring: one graph of each family on each side where two exist.
# spec: "ds:NAME" (partplan datasets), "rmat:SCALE:SEED", "web:N:SEED" (datasets.generators.web_crawl)
SPLIT = {
    "tune": ["ds:as-22july06", "ds:email-Enron", "ds:astro-ph", "ds:copter2", "ds:rgg_n_2_15_s0",
             "rmat:15:1", "web:60000:1"],
    "held-out": ["ds:power", "ds:cond-mat-2003", "ds:polblogs", "ds:mdual", "ds:delaunay_n15",
                 "rmat:16:2", "web:120000:2"],
}
FAMILY = {"as-22july06": "AS topology", "power": "power grid", "email-Enron": "social (e-mail)",
          "cond-mat-2003": "collaboration", "astro-ph": "collaboration", "polblogs": "hyperlink (blogs)",
          "copter2": "FE (3D)", "mdual": "FE dual mesh", "rgg_n_2_15_s0": "random geometric",
          "delaunay_n15": "2D mesh"}
ENGINES = RULE_ENGINES   # the engines the per-graph rule chooses among


def read_json_lines(path: str, option: str, keys: tuple[str, ...]) -> list[dict]:
    """The rows of a JSON-lines file given as ``option``; a line that is not a JSON object with
    ``keys`` is an OptionError naming the option and the file."""
    rows = []
    for no, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as exc:
            raise OptionError(f"{option} {path}: line {no} is not JSON ({exc})") from None
        missing = [key for key in keys if not isinstance(r, dict) or key not in r]
        if missing:
            raise OptionError(f"{option} {path}: line {no} has no {', '.join(map(repr, missing))} "
                              f"(not a file this script wrote)")
        rows.append(r)
    return rows


def family(spec: str) -> str:
    kind, _, rest = spec.partition(":")
    return {"rmat": "R-MAT", "web": "web crawl (generated)"}.get(kind) or FAMILY.get(rest, "?")


def load(spec: str):
    kind, _, rest = spec.partition(":")
    if kind == "ds":
        from partplan.datasets import load_graph
        return load_graph(rest, fetch=True)
    if kind == "rmat":
        from partplan.datasets.generators import rmat
        scale, seed = _ints(spec, rest, "rmat:SCALE:SEED")
        return rmat(scale, seed=seed)
    if kind == "web":
        from partplan.datasets.generators import web_crawl
        n, seed = _ints(spec, rest, "web:N:SEED")
        return web_crawl(n, seed=seed)
    raise OptionError(f"unknown graph spec {spec!r}; use ds:NAME, rmat:SCALE:SEED or web:N:SEED")


def _ints(spec: str, rest: str, form: str) -> tuple[int, int]:
    try:
        a, b = map(int, rest.split(":"))
    except ValueError:
        raise OptionError(f"bad graph spec {spec!r}; use {form}") from None
    return a, b


def run_case(spec: str, k: int, nprocs: int, d: Path, timeout_s: float) -> dict:
    from partplan.io.chunked import write_chunked
    from partplan.metrics.stats import analyze
    from partplan.partition.api import partition
    from partplan.partition.pipeline.distributed import distributed_partition
    from partplan.partition.pipeline.engine_rule import graph_stats

    g = load(spec)
    path = write_chunked(g, d / f"{spec.replace(':', '_')}-{k}.chunked", chunks=8 * nprocs)
    t = time.perf_counter()
    stats = graph_stats(path, k)
    stats_s = time.perf_counter() - t

    def fig(part, wall):
        s = analyze(g, part, k).summary()
        return {"max": max(s["max_send"], s["max_recv"]), "total": s["total_volume"],
                "imbalance": round(s["compute_imbalance"], 4), "wall_s": round(wall, 1)}

    row = {"graph": spec, "family": family(spec), "k": k, "nprocs": nprocs, "stats": stats,
           "stats_s": round(stats_s, 3)}
    t = time.perf_counter()
    row["default"] = fig(partition(g, k).part, time.perf_counter() - t)
    row["hash"] = fig((np.arange(g.n) % k).astype(np.int64), 0.0)
    for eng in ENGINES:
        out = d / f"{eng}.npy"
        t = time.perf_counter()
        try:
            res = distributed_partition(path, k, nprocs=nprocs, output=out, engine=eng, seed=0, quiet=True,
                                        timeout_s=timeout_s)
        except Exception as e:   # noqa: BLE001 - a failed engine is a row, not the end of the run
            row[eng] = {"error": f"{type(e).__name__}: {e}"[:300], "wall_s": round(time.perf_counter() - t, 1)}
            continue
        r = fig(np.load(out), time.perf_counter() - t)
        e = res["engine_result"]
        r["engine_max"], r["engine_total"] = max(e["max_send"], e["max_recv"]), e["total_volume"]
        r["stages_s"] = {kk: max(s[kk]["wall_s"] for s in res["stages"]) for kk in res["stages"][0]}
        row[eng] = r
        out.unlink(missing_ok=True)
        Path(str(out) + ".json").unlink(missing_ok=True)
    return row


def ratios(row: dict, eng: str) -> tuple[float, float] | None:
    r = row.get(eng)
    if not r or "error" in r:
        return None
    return r["max"] / max(row["default"]["max"], 1), r["total"] / max(row["default"]["total"], 1)


def best_of(row: dict, engines) -> str | None:
    """The engine a run-both-keep-the-better rule keeps, judged on its own figures (no default to
    compare with): the lower max x total (A beats B iff max(maxA/maxB, totA/totB) < max(maxB/maxA,
    totB/totA), i.e. the lower product)."""
    ok = [e for e in engines if ratios(row, e)]
    return min(ok, key=lambda e: (row[e]["max"] * row[e]["total"], row[e]["max"])) if ok else None


def apply_rule(row: dict) -> None:
    from partplan.partition.pipeline.engine_rule import choose_engine
    eng, why = choose_engine(row["stats"], set(ENGINES))
    row["rule"] = {"engine": eng, "reason": why}
    rr = ratios(row, eng)
    if rr:
        row["rule"].update({"max/default": round(rr[0], 3), "total/default": round(rr[1], 3),
                            "wall_s": row[eng]["wall_s"]})
    for e in ENGINES:
        rr = ratios(row, e)
        if rr:
            row[e]["max/default"], row[e]["total/default"] = round(rr[0], 3), round(rr[1], 3)
    b = best_of(row, ("zoltan", "stream"))      # the run-two-keep-the-better alternative
    if b:
        rr = ratios(row, b)
        row["keep_better"] = {"engine": b, "max/default": round(rr[0], 3), "total/default": round(rr[1], 3),
                              "wall_s": round(sum(row[e]["wall_s"] for e in ("zoltan", "stream")
                                                  if "error" not in row[e]), 1)}


def report(rows: list[dict], half: str) -> dict:
    print(f"\n== {half} ==  (max = max(send, recv); each engine + refinement + passes, / single-process default)")
    hdr = f"{'graph':22s} {'k':>3s} | " + " | ".join(f"{e:>8s} max  tot   wall" for e in ENGINES) + \
          f" | default wall | rule: engine max tot | keep-better(zoltan, stream): max tot wall"
    print(hdr)
    worst, gm, kb = [], [], []
    for r in rows:
        cells = []
        for e in ENGINES:
            rr = ratios(r, e)
            cells.append(f"{'':>8s} {rr[0]:.3f} {rr[1]:.3f} {r[e]['wall_s']:5.1f}" if rr else f"{'failed':>28s}")
        ru = r["rule"]
        print(f"{r['graph']:22s} {r['k']:3d} | " + " | ".join(cells) +
              f" | {r['default']['wall_s']:10.1f}s | {ru['engine']} {ru.get('max/default', float('nan')):.3f} "
              f"{ru.get('total/default', float('nan')):.3f} | {r['keep_better']['engine']} "
              f"{r['keep_better']['max/default']:.3f} {r['keep_better']['total/default']:.3f} "
              f"{r['keep_better']['wall_s']:.1f}")
        if "max/default" in ru:
            worst.append(max(ru["max/default"], ru["total/default"]))
            gm.append((ru["max/default"], ru["total/default"]))
            kb.append((r["keep_better"]["max/default"], r["keep_better"]["total/default"]))
    if not gm:
        return {}
    def geo(xs):
        return round(math.exp(np.mean([math.log(x) for x in xs])), 3)

    s = {"cases": len(gm), "rule_max_geomean": geo([a for a, _ in gm]), "rule_total_geomean": geo([b for _, b in gm]),
         "rule_worst": round(max(worst), 3), "cases_within_1.05": sum(w <= 1.05 for w in worst),
         "cases_above_1.15": sum(w > 1.15 for w in worst)}
    for e in ENGINES:
        rr = [ratios(r, e) for r in rows]
        if all(rr):
            s[f"{e}_max_geomean"], s[f"{e}_total_geomean"] = geo([a for a, _ in rr]), geo([b for _, b in rr])
            s[f"{e}_worst"] = round(max(max(a, b) for a, b in rr), 3)
    s["keep_better_max_geomean"], s["keep_better_total_geomean"] = geo([a for a, _ in kb]), geo([b for _, b in kb])
    s["keep_better_worst"] = round(max(max(a, b) for a, b in kb), 3)
    # the ceiling of any choice among the three: cases where some engine is within 1.05 on both,
    # and the geometric mean of the lowest max per case
    s["cases_some_engine_within_1.05"] = sum(any(rr and max(rr) <= 1.05 for rr in (ratios(r, e) for e in ENGINES))
                                             for r in rows)
    s["best_engine_max_geomean"] = geo([min(ratios(r, e)[0] for e in ENGINES if ratios(r, e)) for r in rows])
    s["wall_s_sum"] = {"default": round(sum(r["default"]["wall_s"] for r in rows), 1),
                       "rule": round(sum(r["rule"]["wall_s"] for r in rows if "wall_s" in r["rule"]), 1),
                       "keep_better": round(sum(r["keep_better"]["wall_s"] for r in rows), 1),
                       **{e: round(sum(r[e]["wall_s"] for r in rows), 1) for e in ENGINES}}
    print(f"rule on {half}: {s}")
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--half", choices=["tune", "held-out", "both"], default="both")
    ap.add_argument("--graphs", nargs="+", default=None, help="specs instead of the split (reported as 'other')")
    ap.add_argument("--ks", type=positive_int, nargs="+", default=[16, 64])
    ap.add_argument("--nprocs", type=positive_int, default=2)
    ap.add_argument("--timeout", type=positive_float, default=600.0, help="per engine run (s)")
    ap.add_argument("--cache", default=None, help="JSON lines: one per (graph, k); cases there are not rerun")
    ap.add_argument("--rule-only", action="store_true", help="only re-apply the rule to the cached rows")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    halves = {"other": a.graphs} if a.graphs else \
        {h: SPLIT[h] for h in (["tune", "held-out"] if a.half == "both" else [a.half])}
    if a.graphs:
        for spec in a.graphs:
            kind, _, rest = spec.partition(":")
            if kind not in ("ds", "rmat", "web") or not rest:
                ap.error(f"argument --graphs: unknown graph spec {spec!r}; use ds:NAME, rmat:SCALE:SEED or web:N:SEED")
    cache = {}
    if a.cache and Path(a.cache).exists():
        for r in read_json_lines(a.cache, "--cache", ("graph", "k", "nprocs", "stats")):
            cache[(r["graph"], r["k"], r["nprocs"])] = r
    out = {"split": SPLIT, "nprocs": a.nprocs, "ks": a.ks, "rows": {}, "summary": {}}
    with tempfile.TemporaryDirectory(prefix="bench-rule-") as d:
        for half, specs in halves.items():
            rows = []
            for spec in specs:
                for k in a.ks:
                    key = (spec, k, a.nprocs)
                    if key not in cache:
                        if a.rule_only:
                            continue
                        print(f"running {spec} k={k} ...", file=sys.stderr, flush=True)
                        cache[key] = run_case(spec, k, a.nprocs, Path(d), a.timeout)
                        cache[key]["half"] = half
                        if a.cache:
                            with open(a.cache, "a") as f:
                                f.write(json.dumps(cache[key]) + "\n")
                    r = cache[key]
                    r["half"] = half
                    apply_rule(r)
                    rows.append(r)
            out["rows"][half] = rows
            out["summary"][half] = report(rows, half)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
