"""The ``lp`` job: synchronous label propagation on a plan
(:func:`~partplan.runtime.lp.lp_parts`); int64 labels in vertex order, the
changed labels per iteration and the number of communities."""
from __future__ import annotations

import numpy as np

from .analytics import finish, render_iterative
from .args import MAX_REPEATS, int_range
from .common import add_output_option, add_plan_options, plan_inputs, precheck_plan, progress_fn, resolved_kernels
from .registry import Job, register


def run_lp(ctx, cfg: dict) -> dict | None:
    """Label propagation (``cfg["iterations"]`` at most, ``cfg["weighted"]``)."""
    from ..runtime.lp import lp_parts
    m, shards, comm = plan_inputs(ctx, cfg)
    kernels = resolved_kernels(cfg, ctx)
    iters, weighted = int(cfg.get("iterations", 20)), bool(cfg.get("weighted", False))
    ids, lab, rec = lp_parts(m, shards, comm, iterations=iters, weighted=weighted, progress=progress_fn(cfg, ctx),
                             kernels=kernels)
    out = finish(ctx, cfg, m, comm, kernels, ids, lab, rec, {"weighted": weighted, "max_iterations": iters},
                 dtype=np.int64, records_key="records")
    if out is None:
        return None
    rep, full = out
    full = full.astype(np.int64)
    rep["iterations"] = len(rec)
    rep["changed"] = [r["changed"] for r in rec]
    rep["converged"] = bool(rec) and rec[-1]["changed"] == 0
    rep["communities"] = int(np.unique(full).size)
    rep["largest_community"] = int(np.unique(full, return_counts=True)[1].max()) if full.size else 0
    return rep


def _lp_arguments(s) -> None:
    s.add_argument("--iterations", type=int_range(1, MAX_REPEATS), default=20, metavar="N",
                   help=f"iteration limit (default 20, at most {MAX_REPEATS:,}); it stops earlier when no label "
                        f"changes")
    s.add_argument("--weighted", action="store_true",
                   help="sum the edge weights (the plan's values) per label instead of counting neighbours")
    add_plan_options(s, capability="analytics (1d, 2d:RxC, routed:ROUTE:D)")
    add_output_option(s, "npy", "labels.npy: int64[n]")


def _lp_config(args) -> dict:
    from .args import job_config
    cfg = job_config(args, "iterations", "weighted")
    cfg.update({"plan": args.plan, "output": args.output})
    precheck_plan(cfg, args, capability="analytics", job="label propagation")
    return cfg


register(Job(
    name="lp", help="label propagation (communities) from a plan",
    description="Synchronous label propagation on the symmetrized graph: every vertex with a neighbour takes "
                "the most frequent label among its neighbours (each once, self loops ignored; --weighted: the "
                "largest weight sum; sums within a relative 1e-9 tie), ties to the smallest label; labels start as the vertex ids. Only changed "
                "labels are exchanged.",
    examples="  partplan run lp g.plan --nprocs 2 --output labels.npy\n"
             "  partplan run lp g.plan --backend local --iterations 50 --weighted --json",
    add_arguments=_lp_arguments, configure=_lp_config, run=run_lp, render=render_iterative, output="npy"))
