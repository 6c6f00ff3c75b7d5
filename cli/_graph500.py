"""Graph500's set-up for ``partplan run graph500`` (kernel 1): generate the
Kronecker graph, partition it and build its plan — here, above the jobs,
which never reach into the generators or the partitioner. The ``graph500``
job (:mod:`partplan.jobs.traversal`) then runs the searches on that plan.

:func:`prepared` writes the plan and the tuples (for the search keys and the
validation) into a private temporary folder named like the launcher's job
folders (``/tmp/partplan-run-<pid>-*``: removed when the command ends, and by
the next launch if this process was killed) and fills them into the job's
config.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from partplan.errors import PlanError


def graph500_graph(scale: int, edgefactor: int = 16, seed: int = 0):
    """(tuples src, dst, Graph) of Graph500 kernel 1: the Kronecker tuples
    (self loops and duplicates kept, for validation and TEPS) and the
    undirected graph built from them (deduplicated, no self loops)."""
    from partplan.datasets.generators import rmat_edges
    from partplan.graph import Graph
    src, dst = rmat_edges(scale, edgefactor, seed=seed)
    g = Graph.from_edges(src, dst, n=1 << scale, symmetrize=True, self_loops="remove",
                         name=f"graph500-s{scale}-e{edgefactor}")
    return src, dst, g


def graph500_plan(g, nprocs: int, layout: str = "1d", partition: str = "metis", seed: int = 0):
    """Partition ``g`` (``metis``, ``block`` or a partition file) for ``nprocs``
    ranks and build the plan in memory (f = 1, float64)."""
    from partplan.layouts import parse_layout
    from partplan.plan.builder import build_plan
    lay = parse_layout(layout, nprocs)
    if partition == "block":
        part = (np.arange(g.n, dtype=np.int64) * lay.row_blocks) // max(g.n, 1)
    elif partition == "metis":
        from partplan.partition.api import partition as run_partition
        part = run_partition(g, nprocs, model="graph", backend="metis", layout=lay.spec, seed=seed,
                             stats=False).part
    else:
        from partplan.plan.partitions import read_partition_file
        P = read_partition_file(partition, g)
        if P.ranks != nprocs:
            raise PlanError(f"{partition}: the partition is for {P.ranks} ranks, not --nprocs {nprocs}")
        part = P.part
    return build_plan(g, np.asarray(part, dtype=np.int64), nprocs, layout=lay, f=1, dtype="float64")


def _say(on: bool, msg: str) -> None:
    if on and os.environ.get("RANK", "0") == "0":  # under torchrun every process prepares; rank 0 speaks
        print(msg, file=sys.stderr, flush=True)


@contextlib.contextmanager
def prepared(gp: dict, *, progress: bool = False):
    """Graph500's graph and plan for the config part ``gp`` (``scale``,
    ``edgefactor``, ``seed``, ``layout``, ``partition``, ``nprocs``: the
    plan's ranks): yields (plan directory, tuples folder — ``src.npy``,
    ``dst.npy``); both are removed when the block ends."""
    from partplan.plan import write_plan
    from partplan.runtime.launch import RUN_PREFIX
    work = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
    try:
        t0 = time.perf_counter()
        src, dst, g = graph500_graph(int(gp["scale"]), int(gp.get("edgefactor", 16)), int(gp.get("seed", 0)))
        _say(progress, f"generated {src.size:,} tuples, n = {g.n:,} ({time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        plan = graph500_plan(g, int(gp["nprocs"]), gp.get("layout", "1d"), gp.get("partition", "metis"),
                             int(gp.get("seed", 0)))
        _say(progress, f"partitioned ({gp.get('partition', 'metis')}) and planned {plan.manifest['layout']} "
                       f"on {plan.p} ranks ({time.perf_counter() - t0:.1f} s)")
        del g
        path = write_plan(plan, work / "graph500.plan", created=False)
        del plan
        (work / "edges").mkdir()
        np.save(work / "edges" / "src.npy", np.asarray(src, dtype=np.int64))
        np.save(work / "edges" / "dst.npy", np.asarray(dst, dtype=np.int64))
        del src, dst
        yield str(path), str(work / "edges")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_graph500(args) -> int:
    """``partplan run graph500``: the options checked (the job's configure),
    the graph generated, partitioned and planned (:func:`prepared`), then the
    searches as the registered ``graph500`` job on that plan."""
    from partplan.cli._common import run_job_cmd
    from partplan.jobs import get
    cfg = get("graph500").configure(args)  # every option checked before the graph is generated
    with prepared(cfg["graph500"], progress=bool(cfg.get("progress"))) as ready:
        args.graph500_prepared = ready
        return run_job_cmd(args)


def execute_graph500(cfg: dict, *, nprocs: int | None = None, threads: int | None = 1) -> dict | None:
    """The Python entry of a Graph500 run (``cfg`` as the job's configure
    makes it, with ``cfg["graph500"]``): :func:`prepared`, then the
    ``graph500`` job on that plan (:func:`partplan.jobs.execute`)."""
    from partplan.jobs import execute
    with prepared(cfg["graph500"], progress=bool(cfg.get("progress"))) as (plan, edges):
        cfg = dict(cfg, plan=plan, graph500=dict(cfg["graph500"], edges=edges))
        return execute("graph500", cfg, nprocs=nprocs, threads=threads)
