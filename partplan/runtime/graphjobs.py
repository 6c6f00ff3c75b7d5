"""Graph jobs on a plan: ``bfs``, ``graph500``, ``pagerank``, ``wcc``, ``sssp``
— on LocalComm (``backend="local"``: every rank in this process) or one rank
of a torch.distributed job (:func:`graph_worker`, started by
:func:`partplan.runtime.launch.launch` or torchrun).

A job config (dict, JSON-able) names ``job`` and either ``plan`` (a plan
directory) or ``graph500`` (``{"scale", "edgefactor", "seed", "layout",
"partition"}``: every rank generates the Kronecker tuples, partitions and builds
the plan in memory — deterministic, checked equal across ranks). Rank 0
validates, writes outputs atomically and returns the report.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import PartplanError, PlanError
from ..plan.builder import Plan, manifest_groups

GRAPH_JOBS = ("bfs", "graph500", "pagerank", "wcc", "sssp")


# ----------------------------------------------------------------------------- inputs
def plan_edges(manifest: dict, shards) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The nonzeros (row, col, value or None) of A from the forward program's
    local blocks of ``shards`` (global ids)."""
    from .traversal import program_ext_ids, program_parts
    chain, spmm, _ = program_parts(manifest, "forward")
    sp = spmm["id"]
    rs, cs, ds = [], [], []
    for rp in shards:
        ext = program_ext_ids(rp, chain, "forward")
        ip = np.asarray(rp[f"{sp}.indptr"], dtype=np.int64)
        rs.append(np.repeat(np.asarray(rp[f"{sp}.row_ids"], dtype=np.int64), np.diff(ip)))
        cs.append(ext[np.asarray(rp[f"{sp}.indices"], dtype=np.int64)])
        if rp.has(f"{sp}.data"):
            ds.append(np.asarray(rp[f"{sp}.data"], dtype=np.float64))
    r, c = np.concatenate(rs).astype(np.int64), np.concatenate(cs).astype(np.int64)
    return r, c, (np.concatenate(ds) if ds else None)


def graph500_graph(scale: int, edgefactor: int = 16, seed: int = 0):
    """(tuples src, dst, Graph) of Graph500 kernel 1: the Kronecker tuples
    (self loops and duplicates kept, for validation and TEPS) and the
    undirected graph built from them (deduplicated, no self loops)."""
    from ..datasets.generators import rmat_edges
    from ..graph import Graph
    src, dst = rmat_edges(scale, edgefactor, seed=seed)
    g = Graph.from_edges(src, dst, n=1 << scale, symmetrize=True, self_loops="remove",
                         name=f"graph500-s{scale}-e{edgefactor}")
    return src, dst, g


def graph500_plan(src, dst, g, nprocs: int, layout: str = "1d", partition: str = "metis", seed: int = 0) -> Plan:
    """Partition (``metis``, ``block`` or a partition file) and build the plan in memory."""
    from ..layouts import parse_layout
    from ..plan.builder import build_plan
    lay = parse_layout(layout, nprocs)
    if partition == "block":
        part = (np.arange(g.n, dtype=np.int64) * lay.row_blocks) // max(g.n, 1)
    elif partition == "metis":
        from ..partition.api import partition as run_partition
        part = run_partition(g, nprocs, model="graph", backend="metis", layout=lay.spec, seed=seed,
                             stats=False).part
    else:
        from ..partition.api import load_partition
        P = load_partition(partition, g)
        if P.ranks != nprocs:
            raise PlanError(f"{partition}: the partition is for {P.ranks} ranks, not --nprocs {nprocs}")
        part = P.part
    return build_plan(g, np.asarray(part, dtype=np.int64), nprocs, layout=lay, f=1, dtype="float64")


def _setup(cfg: dict, comm_factory, rank: int | None):
    """(manifest, local shards, comm, validation input) for the config; rank
    None = all ranks here (LocalComm)."""
    from ..plan.store import load_plan, load_rank, read_manifest
    if cfg.get("graph500"):
        gp = cfg["graph500"]
        lead = rank in (None, 0)
        t0 = time.perf_counter()
        src, dst, g = graph500_graph(int(gp["scale"]), int(gp.get("edgefactor", 16)), int(gp.get("seed", 0)))
        _progress(cfg, lead, f"generated {src.size:,} tuples, n = {g.n:,} ({time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        plan = graph500_plan(src, dst, g, int(gp["nprocs"]), gp.get("layout", "1d"),
                             gp.get("partition", "metis"), int(gp.get("seed", 0)))
        _progress(cfg, lead, f"partitioned ({gp.get('partition', 'metis')}) and planned {plan.manifest['layout']} "
                             f"on {plan.p} ranks ({time.perf_counter() - t0:.1f} s)")
        m = plan.manifest
        shards = plan.ranks if rank is None else [plan.ranks[rank]]
        comm = comm_factory(m)
        if rank is not None:  # every rank must have built the same plan (checked, not assumed)
            import hashlib
            h = float(int(hashlib.sha1(plan.part.tobytes()).hexdigest()[:12], 16))
            mx = comm.allreduce_world([np.array([h])], "max")[0][0]
            sm = comm.allreduce_world([np.array([h])], "sum")[0][0]
            if mx != h or sm != h * comm.world:
                raise PlanError("the ranks built different Graph500 partitions (partitioner not deterministic "
                                "here); use --partition block or a partition file")
        return m, shards, comm, {"src": src, "dst": dst, "directed": False, "n": g.n}
    path = cfg["plan"]
    m = read_manifest(path)
    if rank is None:
        plan = load_plan(path)
        shards = plan.ranks
    else:
        if m["ranks"] != int(os.environ.get("WORLD_SIZE", m["ranks"])):
            raise PlanError(f"{path}: the plan is for {m['ranks']} ranks but the job has "
                            f"{os.environ.get('WORLD_SIZE')} (use --nprocs {m['ranks']})")
        shards = [load_rank(path, rank, manifest=m)]
    comm = comm_factory(m)
    val = None
    if (rank in (None, 0)) and cfg["job"] == "bfs" and cfg.get("validate", True):
        allsh = shards if rank is None else load_plan(path).ranks
        r, c, _ = plan_edges(m, allsh)
        sym = bool(m["graph"]["symmetric"])
        if sym:
            keep = r <= c
            r, c = r[keep], c[keep]
        val = {"src": r, "dst": c, "directed": not sym, "n": int(m["graph"]["n"])}
    return m, shards, comm, val


def _progress(cfg: dict, leader: bool, msg: str) -> None:
    """A progress line from rank 0: to the launcher's progress file (it echoes
    them), else to stderr."""
    if not (cfg.get("progress") and leader):
        return
    if cfg.get("progress_file"):
        with open(cfg["progress_file"], "a") as fh:
            fh.write(msg + "\n")
    else:
        print(msg, file=sys.stderr, flush=True)


def _atomic_save(path, write) -> None:
    from .._atomic import atomic_path
    with atomic_path(path, suffix=Path(path).suffix) as tmp:
        write(tmp)


def check_output(path, suffix: str):
    """:func:`partplan.outpath.check_output_file` of a job's ``.npy`` / ``.npz``
    / ``.png`` output, None passing through."""
    from ..outpath import check_output_file
    return None if path is None else check_output_file(path, kind=suffix.lstrip("."))


# ----------------------------------------------------------------------------- bfs / graph500
def _roots(cfg: dict, eng, val, leader: bool) -> np.ndarray:
    from .graph500 import search_keys
    if cfg.get("root") is not None:
        return np.array([eng.check_root(cfg["root"])], dtype=np.int64)
    k = int(cfg.get("roots", 64))
    seed = int(cfg.get("seed", 0))
    if val is not None and cfg.get("graph500"):
        return search_keys(val["src"], val["dst"], val["n"], k, seed)
    # degree >= 1 without self loops, from the plan's blocks (edges into each row; for a directed
    # graph also out of it): one length-n sum over ranks; every rank draws the same keys
    from .traversal import world_sum
    vecs = []
    for rg in eng.rgs:
        r_of = np.repeat(np.arange(rg.nrows), np.diff(rg.indptr))
        u, v = rg.ext_ids[rg.indices], rg.row_ids[r_of]
        keep = u != v
        vecs.append(np.bincount(v[keep], minlength=eng.n) + np.bincount(u[keep], minlength=eng.n))
    deg = world_sum(eng.comm, vecs)
    cand = np.flatnonzero(deg > 0)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 500]))
    return np.sort(rng.choice(cand, size=min(k, cand.size), replace=False)) if cand.size else cand


def _family_totals(levels: list[dict], key: str) -> dict:
    """Sum of the levels' per-family figures (payload bytes or messages per group family)."""
    out: dict = {}
    for lv in levels:
        for f, v in (lv.get(key) or {}).items():
            out[f] = out.get(f, 0) + int(v)
    return out


def _bfs_body(cfg: dict, m: dict, shards, comm, val) -> dict | None:
    from .bfs import BfsEngine
    from .graph500 import BfsValidator, teps_stats
    leader = comm.local[0] == 0
    eng = BfsEngine(m, shards, comm, direction=cfg.get("direction", "auto"),
                    alpha=float(cfg.get("alpha", 15.0)), beta=float(cfg.get("beta", 18.0)))
    if cfg.get("steal"):  # frontier stealing on top-down levels (partplan.runtime.steal)
        from .steal import Balancer, StealConfig
        eng.balancer = Balancer(comm, eng.rgs, eng.n, StealConfig.from_cfg(cfg, int(m["ranks"])))
    roots = _roots(cfg, eng, val, leader)
    if roots.size == 0:
        raise PlanError("the graph has no vertex with an edge: no BFS root to search from")
    if cfg.get("warmup", 1):
        eng.search(int(roots[0]))  # untimed warm-up (lazy connections, numba compile)
    searches, parents = [], []
    validator = None if val is None else BfsValidator(val["src"], val["dst"], val["n"], directed=val["directed"])
    for k, root in enumerate(roots):
        res = eng.search(int(root))
        entry = {"root": int(root), "time_s": res.time_s, "edges_examined": res.edges_examined,
                 "levels": [r.to_json() for r in res.records]}
        if leader and val is not None:
            v = validator.check(int(root), res.parents, levels=res.levels)
            entry.update({"valid": v.ok, "failed_checks": v.failed, "edges": v.nedge,
                          "teps": v.nedge / res.time_s if res.time_s > 0 else 0.0})
            if not v.ok:
                entry["validation_errors"] = list(v.messages.values())
        if leader and cfg.get("output"):
            parents.append(res.parents)
        searches.append(entry)
        _progress(cfg, leader, f"search {k + 1}/{roots.size}: root {int(root)}, {len(res.records)} levels, "
                               f"{res.time_s * 1e3:.1f} ms" + ("" if "valid" not in entry else
                                                               f", {'valid' if entry['valid'] else 'INVALID'}"))
    if not leader:
        return None
    if cfg.get("output"):
        out = Path(cfg["output"])
        P = np.stack(parents).astype(np.int64)
        _atomic_save(out, lambda tmp: np.savez(open(tmp, "wb"), roots=roots.astype(np.int64), parents=P))
    levels = [lv for s in searches for lv in s["levels"]]
    rep = {"job": cfg["job"], "ranks": m["ranks"], "backend": cfg.get("backend"), "layout": m["layout"],
           "n": m["graph"]["n"], "nnz": m["graph"]["nnz"], "directed": not m["graph"]["symmetric"],
           "direction": eng.direction, "alpha": eng.alpha, "beta": eng.beta, "roots": int(roots.size),
           "searches": searches,
           "bytes_match": all(lv["bytes"] == lv["bytes_measured"] for lv in levels),
           "chosen_mode_le_other": all(lv["bytes"] <= min(lv["bytes_sparse"], lv["bytes_dense"]) for lv in levels),
           "edges_examined_total": int(sum(s["edges_examined"] for s in searches)),
           "bytes_by_family": _family_totals(levels, "bytes_by_family"),
           "messages_by_family": _family_totals(levels, "messages_by_family"),
           "output": cfg.get("output")}
    if val is not None:
        ok = [s for s in searches if s["valid"]]
        rep["all_valid"] = len(ok) == len(searches)
        if ok and all(s["time_s"] > 0 for s in ok):
            rep.update(teps_stats([s["edges"] for s in ok], [s["time_s"] for s in ok]))
    if cfg.get("graph500"):
        rep["graph500"] = {k: cfg["graph500"][k] for k in ("scale", "edgefactor", "seed", "partition")
                           if k in cfg["graph500"]}
    if eng.balancer is not None:
        from .steal import steal_summary
        rep["steal"] = steal_summary(cfg, levels, eng.balancer, plot_levels=searches[0]["levels"])
    if cfg.get("plot"):
        from .traversal_plot import plot_levels
        plot_levels(rep, cfg["plot"])
        rep["plot"] = cfg["plot"]
    return rep


# ----------------------------------------------------------------------------- dispatch
def _body(cfg, m, shards, comm, val):
    job = cfg["job"]
    if job in ("bfs", "graph500"):
        return _bfs_body(cfg, m, shards, comm, val)
    from . import analytics
    return analytics.BODIES[job](cfg, m, shards, comm)


def run_local(cfg: dict) -> dict:
    """Every rank in this process (LocalComm)."""
    from .comm import LocalComm
    m, shards, comm, val = _setup(cfg, lambda m: LocalComm(m["ranks"], manifest_groups(m)), None)
    return _body(cfg, m, shards, comm, val)


def graph_worker(cfg: dict) -> dict | None:
    """One rank of a torch.distributed graph job; rank 0 returns the report
    (and writes it to ``cfg["result"]``)."""
    import json

    import torch
    import torch.distributed as dist

    from .comm import TorchComm, init_distributed
    backend = cfg.get("backend", "gloo")
    timeout = float(cfg.get("timeout", 60.0))
    if os.environ.get("PARTPLAN_LAUNCHED") and "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if backend == "nccl" else None
    rank, world = init_distributed(backend, timeout_s=timeout, device=device)
    try:
        m, shards, comm, val = _setup(cfg, lambda m: TorchComm(manifest_groups(m), timeout_s=timeout,
                                                               device=device), rank)
        rep = _body(cfg, m, shards, comm, val)
        if rank == 0 and cfg.get("result"):
            from .._atomic import atomic_path
            with atomic_path(cfg["result"]) as tmp:
                Path(tmp).write_text(json.dumps(rep, indent=1))
        return rep
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def run_graph_job(cfg: dict, *, nprocs: int | None = None, threads: int | None = 1) -> dict | None:
    """Run a graph job: ``backend`` "local" here, else ``nprocs`` processes
    (or this process as one rank under torchrun when nprocs is None)."""
    if cfg.get("job") not in GRAPH_JOBS:
        raise PlanError(f"unknown graph job {cfg.get('job')!r}")
    if cfg.get("backend", "gloo") == "local":
        return run_local(cfg)
    from .launch import start
    return start(cfg, nprocs, graph_worker, timeout_s=float(cfg.get("timeout", 60.0)), threads=threads)


__all__ = ["GRAPH_JOBS", "run_graph_job", "run_local", "graph_worker", "plan_edges", "graph500_graph",
           "graph500_plan", "PartplanError"]
