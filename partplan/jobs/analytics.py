"""Iterative analytics jobs on a plan: ``pagerank``, ``wcc``, ``sssp``.

Each runs the runtime's algorithm (:func:`~partplan.runtime.analytics.pagerank_parts`,
``wcc_parts`` or, with ``--method pointer-jump``,
:func:`~partplan.runtime.pointer_jump.wcc_pointer_jump_parts`, ``sssp_parts``)
on the ranks this process holds, gathers the per-vertex result on rank 0
(graph vertex order), writes ``--output`` atomically and reports figures per
iteration and their sums under the keys every job shares: ``bytes_predicted``,
``bytes_measured``, ``bytes_match``. :func:`finish` and
:func:`plan_inputs_world` serve the ``lp`` and ``matching`` jobs too.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import PlanError
from .args import MAX_REPEATS, int_range, positive_float, probability
from .common import (add_output_option, add_plan_options, atomic_save, base_report, family_totals,
                     plan_inputs, precheck_plan, progress_fn, render_footer, render_header, resolved_kernels)
from .registry import Job, register


WCC_METHODS = ("propagate", "pointer-jump")


def plan_inputs_world(ctx, cfg: dict) -> tuple[dict, list, object]:
    """:func:`~.common.plan_inputs` with a ``world`` group over all ranks in the
    comm (the owner messages of pointer jumping; a 1D plan has one already)."""
    from ..plan.store import read_manifest
    from ..program.plan import manifest_groups
    from ..runtime.neighbours import with_world
    m = read_manifest(cfg["plan"])
    shards = ctx.shards(cfg["plan"], m)
    p = int(m["ranks"])
    return m, shards, ctx.comm(with_world(manifest_groups(m), p), p)


def finish(ctx, cfg: dict, m: dict, comm, kernels: str, ids, vals, records, extra: dict, *,
           dtype=np.float64, records_key: str = "iterations") -> tuple[dict, np.ndarray] | None:
    """Gather the values on rank 0, write the output; (report, values in vertex
    order) on the leader. The report holds ``records`` under ``records_key``,
    ``rounds`` (their number), ``time_s`` and the byte sums ``bytes_predicted``,
    ``bytes_measured``, ``bytes_match`` (and ``bytes_all_values`` when the
    records have it: every value sent every round instead of the changed ones)."""
    from ..runtime.traversal import gather_global
    full = gather_global(comm, ids, vals, int(m["graph"]["n"]), -1.0)
    if not ctx.leader:
        return None
    if cfg.get("output"):
        arr = full.astype(dtype)
        atomic_save(Path(cfg["output"]), lambda tmp: np.save(open(tmp, "wb"), arr))
    rep = {**base_report(cfg, m, ctx, kernels),
           records_key: records, "rounds": len(records), "time_s": float(sum(r["time_s"] for r in records)),
           "bytes_predicted": int(sum(r["bytes"] for r in records)),
           "bytes_measured": int(sum(r["bytes_measured"] for r in records)),
           "output": cfg.get("output"), **extra}
    rep["bytes_match"] = all(r["bytes"] == r["bytes_measured"] for r in records)
    if records and "bytes_all_values" in records[0]:
        rep["bytes_all_values"] = int(sum(r["bytes_all_values"] for r in records))
    if records and "bytes_by_family" in records[0]:  # WCC / SSSP: where the bytes went (routed: dom / cross)
        rep["bytes_by_family"] = family_totals(records, "bytes_by_family")
        rep["messages_by_family"] = family_totals(records, "messages_by_family")
    return rep, full


def run_pagerank(ctx, cfg: dict) -> dict | None:
    """PageRank (networkx conventions); the report carries the sum of the ranks."""
    from ..runtime.analytics import pagerank_parts
    m, shards, comm = plan_inputs(ctx, cfg)
    kernels = resolved_kernels(cfg, ctx)
    damping, tol = float(cfg.get("damping", 0.85)), float(cfg.get("tol", 1e-6))
    ids, x, rec = pagerank_parts(m, shards, comm, damping=damping, tol=tol, max_iter=int(cfg.get("max_iter", 100)),
                                 progress=progress_fn(cfg, ctx), kernels=kernels)
    out = finish(ctx, cfg, m, comm, kernels, ids, x, rec, {"damping": damping, "tol": tol})
    if out is None:
        return None
    rep, full = out
    rep["sum"] = float(full.sum())
    return rep


def run_wcc(ctx, cfg: dict) -> dict | None:
    """Weakly connected components (label = smallest vertex id) by min-label
    propagation or (``cfg["method"]`` "pointer-jump") hooking and pointer jumping."""
    method = cfg.get("method", "propagate")
    if method not in WCC_METHODS:
        raise PlanError(f"wcc --method must be one of {', '.join(WCC_METHODS)}, got {method!r}")
    kernels = resolved_kernels(cfg, ctx)
    if method == "pointer-jump":
        from ..runtime.pointer_jump import wcc_pointer_jump_parts
        m, shards, comm = plan_inputs_world(ctx, cfg)
        ids, lab, rec = wcc_pointer_jump_parts(m, shards, comm, progress=progress_fn(cfg, ctx), kernels=kernels)
    else:
        from ..runtime.analytics import wcc_parts
        m, shards, comm = plan_inputs(ctx, cfg)
        ids, lab, rec = wcc_parts(m, shards, comm, progress=progress_fn(cfg, ctx), kernels=kernels)
    out = finish(ctx, cfg, m, comm, kernels, ids, lab, rec, {"method": method}, dtype=np.int64)
    if out is None:
        return None
    rep, full = out
    full = full.astype(np.int64)
    rep["components"] = int(np.unique(full).size)
    rep["largest_component"] = int(np.bincount(full).max()) if full.size else 0
    return rep


def run_sssp(ctx, cfg: dict) -> dict | None:
    """Single-source shortest paths from ``cfg["root"]`` (optionally with frontier stealing)."""
    from ..runtime.analytics import sssp_parts
    from ..runtime.steal import StealConfig, steal_summary
    if cfg.get("root") is None:
        raise PlanError("sssp needs --root V")
    m, shards, comm = plan_inputs(ctx, cfg)
    kernels = resolved_kernels(cfg, ctx)
    steal = StealConfig.from_cfg(cfg, int(m["ranks"]))
    bal: list = []
    ids, dist, rec = sssp_parts(m, shards, comm, cfg["root"], progress=progress_fn(cfg, ctx), steal=steal,
                                kernels=kernels, balancer_out=bal)
    out = finish(ctx, cfg, m, comm, kernels, ids, dist, rec, {"root": int(cfg["root"])})
    if out is None:
        return None
    rep, full = out
    if steal is not None:
        rep["steal"] = steal_summary(cfg, rec, bal[0] if bal else None)
    fin = np.isfinite(full)
    rep["reached"] = int(fin.sum())
    rep["max_distance"] = float(full[fin].max()) if fin.any() else 0.0
    return rep


def render_iterative(rep: dict) -> str:
    """The text report of pagerank / wcc / sssp / lp / matching."""
    out = render_header(rep)
    out.append(f"rounds             {rep['rounds']}   time {rep['time_s']:.4g} s")
    out.append(f"bytes              {rep['bytes_predicted']:,} predicted, {rep['bytes_measured']:,} measured")
    if "bytes_all_values" in rep:
        out.append(f"bytes, all values  {rep['bytes_all_values']:,} (every value every round, no queue)")
    for k in ("method", "sum", "components", "largest_component", "communities", "largest_community", "converged",
              "size", "weight", "reached", "max_distance"):
        if k in rep:
            out.append(f"{k:<18} {rep[k]}")
    return "\n".join(out + render_footer(rep))


# ----------------------------------------------------------------------------- CLI
def _plan_config(args, *keys: str) -> dict:
    from .args import job_config
    cfg = job_config(args, *keys)
    cfg.update({"plan": args.plan, "output": args.output})
    return cfg


def _pagerank_arguments(s) -> None:
    add_plan_options(s, capability="analytics (1d, 2d:RxC, routed:ROUTE:D)")
    s.add_argument("--damping", type=probability, default=0.85, help="damping factor (default 0.85)")
    s.add_argument("--tol", type=positive_float, default=1e-6, help="stop when L1 change < n * tol "
                   "(default 1e-6, networkx)")
    s.add_argument("--max-iter", type=int_range(1, MAX_REPEATS), default=100,
                   help=f"iteration limit (default 100, at most {MAX_REPEATS:,})")
    add_output_option(s, "npy", "pr.npy: float64[n]")


def _pagerank_config(args) -> dict:
    cfg = _plan_config(args, "damping", "tol", "max_iter")   # --damping in [0, 1] by its type
    precheck_plan(cfg, args, capability="analytics", job="PageRank")
    return cfg


def _wcc_arguments(s) -> None:
    add_plan_options(s, capability="analytics (1d, 2d:RxC, routed:ROUTE:D)")
    s.add_argument("--method", choices=WCC_METHODS, default="propagate", metavar="M",
                   help="propagate: min-label propagation, only changed labels exchanged (default; on 1d and routed "
                        "plans each spread through a rank's own components at once: rounds = the parts a path "
                        "crosses; 2d: the diameter); pointer-jump: hooking + pointer jumping (FastSV), O(log n) rounds, each also "
                        "sending parent requests to the parents' owners")
    add_output_option(s, "npy", "labels.npy: int64[n]")


def _wcc_config(args) -> dict:
    cfg = _plan_config(args, "method")
    precheck_plan(cfg, args, capability="analytics",
                  job="WCC by pointer jumping" if args.method == "pointer-jump" else "WCC")
    return cfg


def _sssp_arguments(s) -> None:
    from .traversal import add_steal_options
    add_plan_options(s, capability="analytics (1d, 2d:RxC, routed:ROUTE:D)")
    s.add_argument("--root", type=int, required=True, metavar="V", help="source vertex")
    add_steal_options(s)
    add_output_option(s, "npy", "dist.npy: float64[n] (inf unreachable)")


def _sssp_config(args) -> dict:
    from .traversal import steal_config
    cfg = _plan_config(args, "root")
    steal = steal_config(args)
    if steal is not None:
        cfg["steal"] = steal
    precheck_plan(cfg, args, capability="analytics", job="SSSP")
    return cfg


register(Job(
    name="pagerank", help="PageRank (networkx conventions) from a plan",
    description="Repeated SpMV on the plan's program of A^T; uniform teleport, dangling mass spread "
                "uniformly, stop when the L1 change < n * tol.",
    examples="  partplan run pagerank g.plan --nprocs 2 --damping 0.85 --tol 1e-8 --output pr.npy",
    add_arguments=_pagerank_arguments, configure=_pagerank_config, run=run_pagerank, render=render_iterative,
    output="npy"))

register(Job(
    name="wcc", help="weakly connected components (label = smallest vertex id) from a plan",
    description="Min-label propagation (only changed labels are exchanged) or, with --method pointer-jump, "
                "hooking and pointer jumping (FastSV: O(log n) rounds).",
    examples="  partplan run wcc g.plan --nprocs 2 --output labels.npy\n"
             "  partplan run wcc g.plan --backend local --method pointer-jump --json",
    add_arguments=_wcc_arguments, configure=_wcc_config, run=run_wcc, render=render_iterative, output="npy"))

register(Job(
    name="sssp", help="single-source shortest paths from a plan (non-negative weights)",
    description="Bellman-Ford over the frontier of changed distances; inf = unreachable.",
    examples="  partplan run sssp g.plan --nprocs 2 --root 0 --output dist.npy\n"
             "  partplan run sssp g.plan --backend local --root 0 --steal fsteal --steal-topology tree:2x2 --json",
    add_arguments=_sssp_arguments, configure=_sssp_config, run=run_sssp, render=render_iterative, output="npy"))
