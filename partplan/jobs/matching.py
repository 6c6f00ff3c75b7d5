"""The ``matching`` job: ½-approximate maximum weight matching by locally
dominant edges on a plan (:func:`~partplan.runtime.matching.matching_parts`);
``mate[v]`` in vertex order (−1 unmatched), the weight and size."""
from __future__ import annotations

import numpy as np

from .analytics import finish, plan_inputs_world, render_iterative
from .common import add_output_option, add_plan_options, precheck_plan, progress_fn, resolved_kernels
from .registry import Job, register


def run_matching(ctx, cfg: dict) -> dict | None:
    """The locally dominant matching: mate per vertex, weight (each edge once), size (matched edges)."""
    from ..runtime.matching import matching_parts
    m, shards, comm = plan_inputs_world(ctx, cfg)  # 2D: the mutual checks ask the targets' owners
    kernels = resolved_kernels(cfg, ctx)
    ids, mate, weight, rec = matching_parts(m, shards, comm, progress=progress_fn(cfg, ctx), kernels=kernels)
    out = finish(ctx, cfg, m, comm, kernels, ids, mate, rec, {"weight": weight}, dtype=np.int64,
                 records_key="records")
    if out is None:
        return None
    rep, full = out
    rep["size"] = int((full >= 0).sum()) // 2
    return rep


def _matching_arguments(s) -> None:
    add_plan_options(s, capability="analytics (1d, 2d:RxC, routed:ROUTE:D)")
    add_output_option(s, "npy", "mate.npy: int64[n], -1 = unmatched")


def _matching_config(args) -> dict:
    from .args import job_config
    cfg = job_config(args)
    cfg.update({"plan": args.plan, "output": args.output})
    precheck_plan(cfg, args, capability="analytics", job="matching")
    return cfg


register(Job(
    name="matching", help="1/2-approximate maximum weight matching from a plan",
    description="Locally dominant edges on the symmetrized graph (self loops and weights <= 0 ignored; weight = "
                "the matrix value, 1 when unweighted), ordered by weight descending, then min(u, v), then max(u, "
                "v): the unique result equals the greedy matching in that order.",
    examples="  partplan run matching g.plan --nprocs 2 --output mate.npy\n"
             "  partplan run matching g.plan --backend local --json",
    add_arguments=_matching_arguments, configure=_matching_config, run=run_matching, render=render_iterative,
    output="npy"))
