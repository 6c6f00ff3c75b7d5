#!/usr/bin/env python
"""Training past one machine's memory: per-rank shares against the whole graph on every process.

Set-up (cached in ``--workdir``): R-MAT ``scale`` (edge factor 16, symmetrized, no self loops) as a
chunked graph; a node data file with ``f`` float32 features, labels and masks (``np.savez``,
memory-mappable rows); a 1D plan of ``p`` ranks (METIS's partition of the graph, balancing the loop's
memory per vertex, ``--balance memory``, or row nonzeros, ``--balance nnz``).

Measured, each in a fresh process (peak RSS = ``VmHWM``; "above baseline" subtracts the RSS the
process had once torch, PyG and, for the ranks, the gloo process group were up):

1. **write** — ``write_shares(plan, graph=chunked, features=data)``: peak above baseline against the
   largest share file (goal ≤ 1.5: one share plus one chunk).
2. **single** — the loop on one process holding the whole graph (``edge_index`` of every edge) and
   every feature row: ``relu(Linear(f, h)(x))``, then ``SAGEConv(h, c)`` over every edge, cross
   entropy over the training rows, Adam; ``--epochs`` epochs.
3. **ranks** — the same loop on p gloo processes, each building ``partplan.nn.Halo(plan)`` from its
   share alone (``op(h)`` appends the halo rows); per rank: peak above baseline, its ratio to the
   single process's (goal ≤ 0.35 at p = 4), and the median epoch time.

4. **check cost** (``--check-cost``, alone) — one process reads every rank's share, files in the page
   cache, interleaved ``--repeats`` times: ``read_share`` with its checks (size, metadata, shapes, the
   file's xxh3_128 computed while the arrays are copied, every id range-checked) against the plain read
   (the same map, Arrow parse and block copy, nothing checked); ``read_share(verify=False)`` (every
   check but the checksum); and ``read_share(strong=True)`` (the sha256 first, what ``partplan
   validate`` does). Reported: median seconds, (checked − plain) / plain and the checksum's share.

Usage::

    python benchmarks/bench_shares.py --scale 20 --f 256 --p 4 --workdir /tmp/shares [--json out.json]
    python benchmarks/bench_shares.py --scale 18 --p 4 --check-cost [--repeats 7]

Ratios only: the absolute figures depend on the machine (4 processes on 2 cores time the scheduler).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from partplan.bench.script import run
from partplan.jobs.args import positive_int

HIDDEN, CLASSES = 16, 4


def _mib(b: int) -> float:
    return b / 2 ** 20


def setup(work: Path, scale: int, f: int, p: int, chunks: int, balance: str) -> dict:
    """The chunked graph, the data file and the plan (made once; reused when present). ``balance``:
    "nnz" (the planner's default: each row's nonzeros) or "memory" (what a rank holds per vertex in this
    loop, :func:`partplan.nn.shares.memory_weights`' rule: in-edges + round(row bytes / in-edge bytes),
    an in-edge holding the share's 24 bytes and a float32 message of HIDDEN columns and its gradient)."""
    import partplan
    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.io.chunked import chunk_info, read_chunked
    from partplan.nn.data import write_data
    work.mkdir(parents=True, exist_ok=True)
    g_path, d_path, plan = work / f"rmat{scale}.chunked", work / f"rmat{scale}-f{f}.npz", work / f"rmat{scale}-p{p}-{balance}.plan"
    if not g_path.exists():
        rmat_chunked(scale, 16, seed=0, path=g_path, chunks=chunks)
    n = chunk_info(g_path).n
    if not d_path.exists():
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, f), dtype=np.float32)
        y = rng.integers(0, CLASSES, n)
        split = rng.integers(0, 10, n)
        write_data(d_path, x, y, split < 6, split == 6, split >= 7)
        del x
    if not (plan / "manifest.json").exists():
        g = read_chunked(g_path)
        if balance == "memory":
            import dataclasses
            row = f * 4 + 8 + 3                                   # x, y, three masks
            per_edge = 24 + 2 * 4 * HIDDEN
            g = dataclasses.replace(g, vertex_weights=np.asarray(g.row_nnz) + round(row / per_edge), _cache={})
        part = partplan.partition(g, p, backend="metis", seed=0)
        partplan.write_plan(partplan.build_plan(g, part), plan)
        del g
    return {"graph": g_path, "data": d_path, "plan": plan, "n": n, "nnz": int(chunk_info(g_path).nnz)}


# ----------------------------------------------------------------------------- measured processes
def _write(plan, graph, data) -> dict:
    from partplan._process import current_rss_bytes, peak_rss_bytes, reset_peak
    import torch  # noqa: F401 - the baseline includes what a rank imports
    from partplan.nn.shares import write_shares
    from partplan.plan.store import read_manifest
    base = current_rss_bytes()
    reset_peak()
    t0 = time.perf_counter()
    write_shares(plan, graph=graph, features=data)
    wall = time.perf_counter() - t0
    m = read_manifest(plan)
    return {"peak_above_baseline": peak_rss_bytes() - base, "wall_s": wall,
            "largest_share": max(e["bytes"] for e in m["shares"]["files"])}


def _model(f: int):
    import torch
    from torch_geometric.nn import SAGEConv
    torch.manual_seed(0)
    return torch.nn.Linear(f, HIDDEN), SAGEConv(HIDDEN, CLASSES)


def _single(graph, data, f: int, epochs: int) -> dict:
    import torch
    import torch.nn.functional as F
    import torch_geometric  # noqa: F401
    from partplan._process import current_rss_bytes, peak_rss_bytes, reset_peak
    from partplan.io.chunked import read_chunked
    base = current_rss_bytes()
    reset_peak()
    g = read_chunked(graph)                       # the whole graph: edge (source j -> target i) for A[i, j]
    ei = torch.from_numpy(np.vstack([np.asarray(g.indices, dtype=np.int64),
                                     np.repeat(np.arange(g.n, dtype=np.int64), np.diff(g.indptr))]))
    del g
    d = np.load(data)
    x, y, train = torch.from_numpy(np.array(d["x"])), torch.from_numpy(d["y"]), torch.from_numpy(d["train_mask"])
    lin, conv = _model(f)
    opt = torch.optim.Adam(list(lin.parameters()) + list(conv.parameters()), lr=0.01)
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        opt.zero_grad()
        z = conv(lin(x).relu(), ei)
        F.cross_entropy(z[train], y[train]).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return {"peak_above_baseline": peak_rss_bytes() - base, "epoch_s": float(np.median(times))}


def _rank(rank: int, world: int, port: int, plan: str, f: int, epochs: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    import torch_geometric  # noqa: F401
    from partplan._process import current_rss_bytes, peak_rss_bytes, reset_peak
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    import partplan.nn
    base = current_rss_bytes()
    reset_peak()
    op = partplan.nn.Halo(plan, timeout=600)
    lin, conv = _model(f)
    params = list(lin.parameters()) + list(conv.parameters())
    opt = torch.optim.Adam(params, lr=0.01)
    times = []
    for _ in range(epochs):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        z = conv(op(lin(op.x).relu()), op.edge_index)[:op.num_local]
        partplan.nn.global_mean(F.cross_entropy(z, op.y, reduction="none"), op.train_mask).backward()
        for prm in params:                         # summed gradients: the single process's
            dist.all_reduce(prm.grad)
        opt.step()
        times.append(time.perf_counter() - t0)
    Path(out).write_text(json.dumps({"rank": rank, "peak_above_baseline": peak_rss_bytes() - base,
                                     "epoch_s": float(np.median(times)), "local": op.num_local,
                                     "halo": int(op.halo_ids.size), "edges": int(op.edge_ids.numel())}))
    dist.destroy_process_group()


def _plain_read(plan: Path, rank: int) -> dict:
    """A share read with no check at all: map, Arrow parse, every array copied out a block at a time
    (the copy :func:`partplan.nn.shares.read_share` makes), as torch tensors."""
    import pyarrow.ipc as ipc
    import torch
    from partplan.plan.store import _Mapped
    mp = _Mapped(plan / f"share-{rank:05d}.arrow", "share")
    batch = ipc.open_file(mp.buf).get_batch(0)
    names = batch.schema.names
    copies, _, _ = mp.copy_checked([c.values.to_numpy(zero_copy_only=True) for c in batch.columns])
    return {k: torch.from_numpy(c) for k, c in zip(names, copies)}


def check_cost(plan: Path, repeats: int) -> dict:
    """Median seconds of the plain read, the checked read and the sha256-first read of every rank's
    share (one process, interleaved, page cache warm)."""
    from partplan.nn.rows import RankRows, exchange_step
    from partplan.nn.shares import read_share
    from partplan.plan.store import load_rank, read_manifest
    m = read_manifest(plan)
    p = int(m["ranks"])
    rows = [RankRows(str(plan), m, load_rank(plan, r, manifest=m), exchange_step(str(plan), m)) for r in range(p)]
    kinds = {"plain": lambda r: _plain_read(plan, r),
             "checked": lambda r: read_share(plan, r, manifest=m, local_ids=rows[r].local_ids,
                                             halo_ids=rows[r].halo_ids),
             "no checksum": lambda r: read_share(plan, r, manifest=m, local_ids=rows[r].local_ids,
                                                 halo_ids=rows[r].halo_ids, verify=False),
             "sha256": lambda r: read_share(plan, r, manifest=m, local_ids=rows[r].local_ids,
                                            halo_ids=rows[r].halo_ids, strong=True)}
    for fn in kinds.values():   # warm: page cache, imports
        for r in range(p):
            fn(r)
    times = {k: [] for k in kinds}
    cpu = {k: [] for k in kinds}     # this process's CPU seconds (user + system): what other load leaves alone
    for _ in range(repeats):
        for k, fn in kinds.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for r in range(p):
                fn(r)
            times[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    med = {k: float(np.median(v)) for k, v in times.items()}
    mcpu = {k: float(np.median(v)) for k, v in cpu.items()}
    return {"ranks": p, "bytes": sum(e["bytes"] for e in m["shares"]["files"]), "repeats": repeats,
            "median_s": med, "runs_s": times, "median_cpu_s": mcpu, "runs_cpu_s": cpu,
            "check_cost": (med["checked"] - med["plain"]) / med["plain"],
            "checksum_cost": (med["checked"] - med["no checksum"]) / med["no checksum"],
            "sha256_cost": (med["sha256"] - med["plain"]) / med["plain"],
            "check_cost_cpu": (mcpu["checked"] - mcpu["plain"]) / mcpu["plain"],
            "checksum_cost_cpu": (mcpu["checked"] - mcpu["no checksum"]) / mcpu["no checksum"],
            "sha256_cost_cpu": (mcpu["sha256"] - mcpu["plain"]) / mcpu["plain"]}


def _child(kind: str, args: list[str]) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", kind, *args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{kind} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--f", type=positive_int, default=64, help="float32 features per vertex")
    ap.add_argument("--p", type=positive_int, default=4, help="ranks")
    ap.add_argument("--epochs", type=positive_int, default=3)
    ap.add_argument("--chunks", type=positive_int, default=16)
    ap.add_argument("--balance", choices=("nnz", "memory"), default="memory",
                    help="what METIS balances: row nonzeros, or the loop's memory per vertex (default)")
    ap.add_argument("--workdir", default="/tmp/partplan-bench-shares")
    ap.add_argument("--json", help="write the figures as JSON here")
    ap.add_argument("--check-cost", action="store_true",
                    help="only measure the cost of read_share's checks against the plain read")
    ap.add_argument("--repeats", type=positive_int, default=7, help="--check-cost: interleaved repeats (median)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child == "write":
        print(json.dumps(_write(*a.rest)))
        return 0
    if a.child == "single":
        print(json.dumps(_single(a.rest[0], a.rest[1], int(a.rest[2]), int(a.rest[3]))))
        return 0
    if a.child == "ranks":
        import torch.multiprocessing as mp
        plan, f, epochs, p, tmp = a.rest[0], int(a.rest[1]), int(a.rest[2]), int(a.rest[3]), a.rest[4]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = [mp.get_context("spawn").Process(target=_rank, args=(r, p, port, plan, f, epochs,
                                                                   f"{tmp}/rank{r}.json")) for r in range(p)]
        for pr in procs:
            pr.start()
        for pr in procs:
            pr.join()
        if any(pr.exitcode for pr in procs):
            raise SystemExit("a rank failed")
        print(json.dumps([json.loads(Path(f"{tmp}/rank{r}.json").read_text()) for r in range(p)]))
        return 0
    work = Path(a.workdir)
    t0 = time.perf_counter()
    s = setup(work, a.scale, a.f, a.p, a.chunks, a.balance)
    print(f"set-up: R-MAT {a.scale} ({s['n']:,} vertices, {s['nnz']:,} nonzeros), {a.f} float32 features "
          f"({_mib(s['n'] * a.f * 4):,.0f} MiB), plan of {a.p} ranks balancing {a.balance} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    if a.check_cost:
        m_path = s["plan"] / "manifest.json"
        if "shares" not in json.loads(m_path.read_text()):
            _child("write", [str(s["plan"]), str(s["graph"]), str(s["data"])])
        c = check_cost(s["plan"], a.repeats)
        md = c["median_s"]
        print(f"read every share of {c['ranks']} ranks ({_mib(c['bytes']):,.0f} MiB), median of {c['repeats']}: "
              f"plain {md['plain'] * 1e3:.1f} ms, checked {md['checked'] * 1e3:.1f} ms (without the checksum "
              f"{md['no checksum'] * 1e3:.1f} ms), sha256 first {md['sha256'] * 1e3:.1f} ms; all checks cost "
              f"{100 * c['check_cost']:.1f} % of the plain read (goal <= 10 %; sha256 first: "
              f"{100 * c['sha256_cost']:.0f} %), the checksum alone {100 * c['checksum_cost']:.1f} % of the read "
              f"with the other checks")
        mc = c["median_cpu_s"]
        print(f"CPU time (this process): plain {mc['plain'] * 1e3:.1f} ms, checked {mc['checked'] * 1e3:.1f} ms, "
              f"without the checksum {mc['no checksum'] * 1e3:.1f} ms, sha256 first {mc['sha256'] * 1e3:.1f} ms; "
              f"all checks {100 * c['check_cost_cpu']:.1f} %, the checksum {100 * c['checksum_cost_cpu']:.1f} %, "
              f"sha256 first {100 * c['sha256_cost_cpu']:.0f} %")
        if a.json:
            Path(a.json).write_text(json.dumps({"scale": a.scale, "f": a.f, "p": a.p, **c}, indent=1))
        return 0
    w = _child("write", [str(s["plan"]), str(s["graph"]), str(s["data"])])
    print(f"write shares: peak {_mib(w['peak_above_baseline']):,.0f} MiB above baseline, largest share "
          f"{_mib(w['largest_share']):,.0f} MiB: {w['peak_above_baseline'] / w['largest_share']:.2f}x one share "
          f"({w['wall_s']:.1f} s)", flush=True)
    one = _child("single", [str(s["graph"]), str(s["data"]), str(a.f), str(a.epochs)])
    print(f"single process: peak {_mib(one['peak_above_baseline']):,.0f} MiB above baseline, epoch "
          f"{one['epoch_s']:.2f} s", flush=True)
    ranks = _child("ranks", [str(s["plan"]), str(a.f), str(a.epochs), str(a.p), str(work)])
    print(f"{'rank':>4} {'local':>9} {'halo':>9} {'edges':>11} {'peak MiB':>9} {'vs single':>9} {'epoch s':>8}")
    for r in ranks:
        print(f"{r['rank']:>4} {r['local']:>9,} {r['halo']:>9,} {r['edges']:>11,} "
              f"{_mib(r['peak_above_baseline']):>9,.0f} {r['peak_above_baseline'] / one['peak_above_baseline']:>9.3f} "
              f"{r['epoch_s']:>8.2f}")
    worst = max(r["peak_above_baseline"] for r in ranks) / one["peak_above_baseline"]
    print(f"largest rank peak / single-process peak: {worst:.3f} (goal <= 0.35 at p = 4); writer: "
          f"{w['peak_above_baseline'] / w['largest_share']:.2f}x one share (goal <= 1.5)")
    if a.json:
        Path(a.json).write_text(json.dumps({"scale": a.scale, "f": a.f, "p": a.p, "balance": a.balance,
                                            "n": s["n"], "nnz": s["nnz"],
                                            "write": w, "single": one, "ranks": ranks,
                                            "worst_rank_vs_single": worst}, indent=1))
    return 0


if __name__ == "__main__":
    run(main)
