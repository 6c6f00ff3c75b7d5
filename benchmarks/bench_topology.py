#!/usr/bin/env python
"""Hierarchy-aware planning benchmark: mapping, routing, dedupe, α-β time,
bytes per level measured == predicted.

For each graph (email-Enron from datasets/, R-MAT scale 16 symmetrized) at 64 ranks as
16 domains × 4 (``tree:4x16``: intra cost 1, inter 10; α, β 10× across domains):

* mapping — METIS k = 64 with identity placement vs greedy + swap placement vs
  hierarchical partitioning (4 ... split across domains first): topology cost and
  crossing rows ratios; exact optimality of the greedy mapping against brute
  force for k = 6 (tree:3x2 and tree:2x3);
* routes — flat / source / domain: crossing rows and messages, the dedupe gain
  (domain crossing rows / flat), checks against independent counts (communicating
  domain pairs, distinct (row, destination domain) pairs), busiest rank, modeled
  α-β time ratio to flat;
* measured — every route executed on LocalComm with 64 virtual ranks: bytes per
  level from the comm's counters == predicted; and one gloo run, 4 processes as
  2 domains × 2 (email-Enron), measured bytes == the plan's pairs;
* nested — email-Enron on tree:4x8x2: flat vs routing at one level vs nested.

Usage::

    python benchmarks/bench_topology.py                  # both graphs, gloo run included
    python benchmarks/bench_topology.py --graphs email-Enron --no-gloo
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from partplan.bench.script import add_json_option, check_json_output, run, write_json
from partplan.jobs.args import positive_int


def load(name: str):
    from partplan import datasets
    if name.startswith("rmat"):
        from partplan.datasets.generators import rmat
        return rmat(int(name[4:]), seed=1).normalize(symmetrize=True, self_loops="remove")
    return datasets.load(name)


def independent_counts(g, part, D: int, p: int):
    """(distinct (row, destination domain) pairs across domains, communicating domain pairs, the
    domain route's cross-domain messages), counted from the matrix directly (not through the
    routing code). Messages: with fewer remote domains than ranks per domain a domain pair's rows
    go over L = D // (p/D − 1) lanes, row j on lane j mod L (docs/design/topology.md), so one
    message per (source domain, destination domain, lane) that carries a row; L = 1 otherwise."""
    from partplan.metrics.volume1d import needed_pairs
    dom = part // D
    nd = int(dom.max()) + 1
    j, e = needed_pairs(g.indptr, g.indices, dom, nd, g.n)
    off = dom[j] != e
    pairs = int(off.sum())
    dp = np.unique(dom[j[off]] * nd + e[off]).size
    remote = p // D - 1
    lanes = max(1, D // remote) if 0 < remote < D else 1
    msgs = np.unique((dom[j[off]] * nd + e[off]) * lanes + j[off] % lanes).size
    return pairs, dp, msgs


def row(cols, widths):
    return "  ".join(str(c).rjust(w) for c, w in zip(cols, widths))


def bench_graph(name: str, p: int, D: int, f: int, log, rec: dict) -> list[str]:
    """The graph's table lines; its figures go to ``rec`` (mapping and route rows, for --json)."""
    from partplan import analyze
    from partplan.topology.hierarchy import hierarchical_partition
    from partplan.topology.mapping import brute_force_map, greedy_map, map_parts, mapping_cost
    from partplan.metrics.topology import level_bytes, topology_metrics
    from partplan.partition import metis
    from partplan.plan import build_plan
    from partplan.runtime import Executor, LocalComm
    from partplan.topology import load_topology

    out = []
    t = load_topology(f"tree:{D}x{p // D}")
    g = load(name)
    log(f"{name}: n={g.n} nnz={g.nnz}")
    t0 = time.perf_counter()
    part = np.asarray(metis(g, p, seed=0), dtype=np.int64)
    t_part = time.perf_counter() - t0
    rb = f * 8  # float64 rows (LocalComm's numpy ops)

    # ---- mapping
    V = analyze(g, part, p, f=1, backward=False).volume
    t0 = time.perf_counter()
    mapped, info = map_parts(g, part, t, "greedy")
    t_map = time.perf_counter() - t0
    t0 = time.perf_counter()
    hier = hierarchical_partition(g, t)
    t_hier = time.perf_counter() - t0

    def flat_cross(pt):
        return topology_metrics([analyze(g, pt, p, f=1, backward=False).volume], t, row_bytes=rb)

    base, mm, hh = flat_cross(part), flat_cross(mapped), flat_cross(hier)
    c0 = base["levels"][0]["crossing_rows"]
    out.append(f"## {name} (n={g.n:,}, nnz={g.nnz:,}), p={p} as {p // D} domains x {D}, METIS {t_part:.2f} s")
    out.append("mapping             topology cost  ratio  crossing rows  ratio  total rows   time s")
    rec.update(graph=name, n=g.n, nnz=g.nnz, p=p, domain=D, mapping=[], routes=[])
    for label, m, tm in (("identity", base, 0.0), ("greedy+swap", mm, t_map), ("hierarchical", hh, t_hier)):
        rec["mapping"].append({"mapping": label, "cost": m["cost"], "cost_ratio": m["cost"] / base["cost"],
                               "crossing_rows": m["levels"][0]["crossing_rows"], "total_rows": m["total_rows"],
                               "seconds": tm})
        out.append(f"{label:<18} {m['cost']:>14.0f}  {m['cost'] / base['cost']:.3f}  {m['levels'][0]['crossing_rows']:>13}"
                   f"  {m['levels'][0]['crossing_rows'] / c0:.3f}  {m['total_rows']:>10}  {tm:7.2f}")
    opt = []
    for spec in ("tree:3x2", "tree:2x3"):
        t6 = load_topology(spec)
        p6 = np.asarray(metis(g, 6, seed=0), dtype=np.int64)
        V6 = analyze(g, p6, 6, f=1, backward=False).volume
        got = mapping_cost(V6, t6.cost, greedy_map(V6, t6.cost))
        _, best = brute_force_map(V6, t6.cost)
        opt.append(f"{spec}: greedy {got:.0f} vs brute force {best:.0f} ({'optimal' if abs(got - best) < 1e-9 else 'NOT optimal'})")
    out.append("k=6 mapping vs brute force: " + "; ".join(opt))

    # ---- routes (on the mapped partition)
    pairs, dpairs, dmsgs = independent_counts(g, mapped, D, p)
    out.append("")
    out.append("route    crossing rows  dedupe  crossing msgs  busiest rank rows  alpha-beta s  vs flat  "
               "checks  LocalComm bytes/level == predicted")
    H = np.random.default_rng(0).standard_normal((g.n, f))
    ref = None
    flat_ab = flat_rows = None
    for route, spec in (("flat", "1d"), ("source", f"routed:source:{D}"), ("domain", f"routed:domain:{D}")):
        t0 = time.perf_counter()
        plan = build_plan(g, mapped, p, layout=spec, f=f, dtype="float64", backward=False)
        t_build = time.perf_counter() - t0
        steps = [plan.stats.volume] if spec == "1d" else list(plan.stats.stages.values())
        m = topology_metrics(steps, t, row_bytes=rb, route=route)
        lv = m["levels"][0]
        ex = Executor(plan.manifest, plan.ranks, LocalComm(p, plan.groups()))
        outs = ex.forward([H[rp.in_ids()] for rp in plan.ranks])
        Z = np.zeros_like(H)
        for rp, o in zip(plan.ranks, outs):
            Z[rp.out_ids()] = o
        if ref is None:
            ref = g.to_scipy() @ H
        exact = np.array_equal(Z, ref)
        meas = level_bytes(ex.comm.sent_bytes, t)
        match = meas["domain"] == lv["crossing_bytes"] and meas["local"] == m["local_bytes"]
        if route == "flat":
            flat_ab, flat_rows = m["alpha_beta_s"], lv["crossing_rows"]
            checks = "-"
        elif route == "domain":
            checks = "ok" if (lv["crossing_rows"] == pairs and lv["crossing_messages"] == dmsgs) else "FAIL"
        else:
            checks = "ok" if lv["crossing_rows"] == pairs else "FAIL"
        rec["routes"].append({"route": route, "crossing_rows": lv["crossing_rows"],
                              "crossing_messages": lv["crossing_messages"], "busiest_rank_rows": m["busiest_rank_rows"],
                              "alpha_beta_s": m["alpha_beta_s"], "independent_check": checks,
                              "bytes_match": bool(match), "exact": bool(exact), "build_s": t_build})
        out.append(f"{route:<7} {lv['crossing_rows']:>14}  {lv['crossing_rows'] / flat_rows:.3f}  "
                   f"{lv['crossing_messages']:>13}  {m['busiest_rank_rows']:>17}  {m['alpha_beta_s']:12.3e}  "
                   f"{m['alpha_beta_s'] / flat_ab:6.3f}  {checks:>6}  "
                   f"{'yes' if match else 'NO'} (domain {meas['domain']:,} B, local {meas['local']:,} B; Z "
                   f"{'ok' if exact else 'WRONG'}; build {t_build:.2f} s)")
    out.append(f"independent counts: distinct (row, destination domain) = {pairs}, communicating domain pairs = "
               f"{dpairs}, domain-route messages across domains = {dmsgs}")
    return out


def bench_nested(f: int, log) -> list[str]:
    """email-Enron, METIS k = 64 on tree:4x8x2: flat vs routing at one level vs nested."""
    from partplan import datasets
    from partplan.metrics.topology import topology_metrics
    from partplan.partition import metis
    from partplan.plan import build_plan
    from partplan.runtime import Executor, LocalComm
    from partplan.topology import load_topology

    log("nested routes")
    g = datasets.load("email-Enron")
    part = np.asarray(metis(g, 64, seed=0), dtype=np.int64)
    t = load_topology("tree:4x8x2")
    out = ["", "nested routes: email-Enron, METIS k=64, tree:4x8x2 (4 per node, 8 nodes per rack, 2 racks)",
           "route                 rows crossing racks  rows crossing nodes  alpha-beta s  vs flat   cost      "
           "LocalComm bytes/level == predicted"]
    H = np.random.default_rng(0).standard_normal((g.n, f))
    flat_ab = None
    for label, spec in (("flat", "1d"), ("node level only", "routed:domain:4"), ("rack level only", "routed:domain:32"),
                        ("nested (node, rack)", "routed:domain:4,32")):
        plan = build_plan(g, part, 64, layout=spec, f=f, dtype="float64", backward=False)
        steps = [plan.stats.volume] if spec == "1d" else list(plan.stats.stages.values())
        m = topology_metrics(steps, t, row_bytes=f * 8)
        ex = Executor(plan.manifest, plan.ranks, LocalComm(64, plan.groups()))
        ex.forward([H[rp.in_ids()] for rp in plan.ranks])
        from partplan.metrics.topology import level_bytes
        meas = level_bytes(ex.comm.sent_bytes, t)
        ok = meas["node"] == m["levels"][0]["crossing_bytes"] and meas["rack"] == m["levels"][1]["crossing_bytes"] \
            and meas["local"] == m["local_bytes"]
        flat_ab = flat_ab or m["alpha_beta_s"]
        out.append(f"{label:<21} {m['levels'][1]['crossing_rows']:>19}  {m['levels'][0]['crossing_rows']:>19}  "
                   f"{m['alpha_beta_s']:12.3e}  {m['alpha_beta_s'] / flat_ab:7.3f}  {m['cost']:9.3g}  "
                   f"{'yes' if ok else 'NO'}")
    return out


def bench_gloo(f: int, log) -> list[str]:
    from partplan import datasets
    from partplan.metrics.topology import level_bytes
    from partplan.partition import metis
    from partplan.plan import build_plan, write_plan
    from partplan.program.plan import manifest_volume
    from partplan.runtime.spmm import run_spmm
    from partplan.topology import load_topology

    g = datasets.load("email-Enron")
    part = metis(g, 4, seed=0)
    t = load_topology("tree:2x2")
    out = ["", "gloo, 4 processes as 2 domains x 2 (email-Enron, METIS k=4, f=%d float32)" % f,
           "route    bytes predicted  bytes measured  match  domain-level bytes  local bytes  step s"]
    with tempfile.TemporaryDirectory() as d:
        for route, spec in (("flat", "1d"), ("domain", "routed:domain:2")):
            path = write_plan(build_plan(g, part, 4, layout=spec, backward=False), Path(d) / f"{route}.plan")
            log(f"gloo {route}")
            rep = run_spmm(path, nprocs=4, backend="gloo", f=f, repeat=3, timeout=60)
            lb = level_bytes(manifest_volume(__import__("json").loads((path / "manifest.json").read_text()))
                             * f * 4, t)
            out.append(f"{route:<7} {rep['bytes_predicted']:>16,}  {rep['bytes_measured']:>14,}  "
                       f"{'yes' if rep['bytes_match'] else 'NO':>5}  {lb['domain']:>18,}  {lb['local']:>11,}  "
                       f"{rep['step_s']:.4f}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=["email-Enron", "rmat16"])
    ap.add_argument("--p", type=positive_int, default=64, help="ranks (default 64)")
    ap.add_argument("--domain", type=positive_int, default=4, help="ranks per domain (default 4)")
    ap.add_argument("-f", type=positive_int, default=16, help="feature width for bytes (default 16; float64 on LocalComm, "
                                                      "float32 on gloo)")
    ap.add_argument("--no-gloo", action="store_true", help="skip the 4-process gloo run")
    add_json_option(ap)
    args = ap.parse_args(argv)
    check_json_output(args.json)
    if args.domain > args.p:
        ap.error(f"argument --domain: ranks per domain ({args.domain}) exceed --p ({args.p})")
    t0 = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    lines, graphs = [], []
    for name in args.graphs:
        graphs.append({})
        lines += bench_graph(name, args.p, args.domain, args.f, log, graphs[-1])
        lines.append("")
    nested = bench_nested(args.f, log)
    gloo = [] if args.no_gloo else bench_gloo(args.f, log)
    lines += nested + gloo
    print("\n".join(lines))
    failed = [ln for ln in lines if " FAIL " in f" {ln} " or "WRONG" in ln or " NO " in f" {ln} "]
    write_json(args.json, {"graphs": graphs, "nested_lines": nested, "gloo_lines": gloo, "failed_checks": len(failed)},
               argv)
    if failed:       # an independent count or a measured byte count disagrees: the run fails
        print(f"bench_topology: {len(failed)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run(main)
