"""Halo exchange time against a bare ``all_to_all_single`` of the same split sizes
(the floor any halo exchange pays), on p gloo processes of this machine.

    python examples/halo_timing.py --ranks 2 --nodes 20000 --edges 200000 -f 64 --repeats 50

Each repeat times, on every rank, ``op(x)`` (gather the send rows, exchange, append
the halo rows; under ``torch.no_grad``) and ``all_to_all_single`` from a
preallocated send buffer into a preallocated receive buffer with the plan's splits,
alternating, after a barrier; rank 0 prints the medians (max over ranks per repeat)
and their ratio as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time


def _worker(rank, world, port, tmp, args):
    import torch
    import torch.distributed as dist

    from partplan.nn import Halo
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    ei = torch.load(os.path.join(tmp, "ei.pt"))
    op = Halo(os.path.join(tmp, "g.plan"), ei)
    v = op._view
    x = torch.randn(op.num_local, args.f)
    send = torch.randn(int(v.send_counts.sum()), args.f)
    recv = torch.empty(int(v.recv_counts.sum()), args.f)
    sc, rc = v.send_counts.tolist(), v.recv_counts.tolist()
    pg = op.comm._pg[v.family]
    t_halo, t_a2a = [], []
    with torch.no_grad():
        for i in range(args.repeats + 5):
            dist.barrier()
            t0 = time.perf_counter()
            op(x)
            t1 = time.perf_counter()
            dist.barrier()
            t2 = time.perf_counter()
            dist.all_to_all_single(recv, send, rc, sc, group=pg)
            t3 = time.perf_counter()
            if i >= 5:
                t_halo.append(t1 - t0)
                t_a2a.append(t3 - t2)
    t = torch.tensor([t_halo, t_a2a], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        h, a = statistics.median(t[0].tolist()), statistics.median(t[1].tolist())
        print(json.dumps({"ranks": world, "rows_sent": int(v.send_counts.sum()), "f": args.f,
                          "halo_median_ms": h * 1e3, "alltoall_median_ms": a * 1e3, "ratio": h / a}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--edges", type=int, default=200000)
    ap.add_argument("-f", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args(argv)
    import torch
    import torch.multiprocessing as mp

    import partplan
    with tempfile.TemporaryDirectory(prefix="halo_timing-") as tmp:   # the plan and edges, removed at exit
        ei = torch.randint(0, args.nodes, (2, args.edges), generator=torch.Generator().manual_seed(0))
        torch.save(ei, os.path.join(tmp, "ei.pt"))
        partplan.plan_from_pyg({"edge_index": ei, "num_nodes": args.nodes}, args.ranks, model="graph", seed=0,
                               out=os.path.join(tmp, "g.plan"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(_worker, args=(args.ranks, port, tmp, args), nprocs=args.ranks, start_method="spawn")


if __name__ == "__main__":
    sys.exit(main())
