"""GCN training from plans against its peers, measured in the same run.

A. Full-batch epoch time on email-Enron (embedded; n = 36,692), random
   features F, hidden H, 2 layers: partplan at p = 1 and p = 2 (gloo, one
   torch thread per process) against PyG ``GCNConv`` single-process (one
   thread, ``cached=True``), median over epochs after the first. Bytes per
   epoch predicted == measured.
B. Mini-batch exchange (the stochastic model's job): the same sampler on a
   full-batch hypergraph partition and on a stochastic-model partition; mean
   measured rows per batch over ``--batches`` batches (LocalComm counters,
   which are the bytes gloo moves: tested equal), their ratio, and each
   against the model's ``expected_volume`` (held-out batches).

    python benchmarks/bench_gcn.py [--quick] [--json out/bench/gcn.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def pyg_epoch_s(g, f: int, hidden: int, classes: int, epochs: int, seed: int = 0) -> float:
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    from partplan.nn.data import random_data
    torch.set_num_threads(1)
    d = random_data(np.arange(g.n), f, classes, seed)
    x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
    tm = torch.from_numpy(d["train_mask"])
    ei = torch.tensor(np.vstack([g.indices, g.rows]), dtype=torch.long)
    torch.manual_seed(seed)
    c1, c2 = GCNConv(f, hidden, cached=True), GCNConv(hidden, classes, cached=True)
    opt = torch.optim.Adam(list(c1.parameters()) + list(c2.parameters()), lr=0.01, weight_decay=5e-4)
    ts = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        out = c2(torch.relu(c1(x, ei)), ei)
        loss = F.cross_entropy(out[tm], y[tm])
        opt.zero_grad()
        loss.backward()
        opt.step()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts[1:]))


def _classes(text: str) -> int:
    """argparse type of --classes: an integer >= 2."""
    v = positive_int(text)
    if v < 2:
        raise argparse.ArgumentTypeError(f"expected an integer >= 2, got {v}")
    return v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--f", type=positive_int, default=64, help="features (default 64)")
    ap.add_argument("--hidden", type=positive_int, default=64, help="hidden width (default 64)")
    ap.add_argument("--classes", type=_classes, default=8)
    ap.add_argument("--epochs", type=positive_int, default=20)
    ap.add_argument("--batches", type=positive_int, default=500, help="mini-batches per partition (default 500)")
    ap.add_argument("--k", type=positive_int, default=4, help="ranks of the mini-batch comparison (default 4)")
    ap.add_argument("--sampler", default="neighbor:512:10,5")
    ap.add_argument("--quick", action="store_true", help="fewer epochs and batches (smoke run)")
    ap.add_argument("--only", choices=("full", "minibatch"), help="run one part only")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args(argv)
    if a.quick:
        a.epochs, a.batches = 6, 40
    from partplan import datasets
    g = datasets.load_graph("email-Enron")
    tmp = Path(tempfile.mkdtemp(prefix="bench-gcn-"))
    res = {"graph": g.name, "n": g.n, "nnz": g.nnz, "f": a.f, "hidden": a.hidden, "classes": a.classes}
    # ---------------------------------------------------------------- A: full batch
    if a.only != "minibatch":
        full_batch(a, g, tmp, res)
    if a.only != "full":
        minibatch(a, g, tmp, res)
    if a.json:
        p = Path(a.json)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(res, indent=1))
    return 0


def full_batch(a, g, tmp, res):
    from partplan.nn.train import train_gcn
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan
    print(f"A. full-batch epoch, {g.name} (n={g.n:,}, nnz={g.nnz:,}), F={a.f}, hidden={a.hidden}, "
          f"{a.epochs} epochs, 1 thread per process", flush=True)
    pyg = pyg_epoch_s(g, a.f, a.hidden, a.classes, a.epochs)
    rows = [("PyG GCNConv, 1 process", pyg, None, None)]
    for p in (1, 2):
        part = partition(g, p, seed=0) if p > 1 else np.zeros(g.n, np.int64)
        plan = write_plan(build_plan(g, part, k=p, normalize="gcn"), tmp / f"p{p}.plan")
        r = train_gcn(plan, nprocs=p, random_features=a.f, classes=a.classes, hidden=a.hidden, epochs=a.epochs,
                      dropout=0.5, timeout=120)
        rows.append((f"partplan p={p} (gloo)", r["epoch_s"], r, r["bytes_match"]))
        res[f"p{p}"] = {k: r[k] for k in ("epoch_s", "exchange_s", "spmm_s", "allreduce_s", "dense_s",
                                           "bytes_per_epoch_predicted", "bytes_per_epoch_measured", "bytes_match")}
    res["pyg_epoch_s"] = pyg
    print(f"{'run':<26}{'epoch ms':>10}{'vs PyG':>8}{'exch ms':>9}{'spmm ms':>9}{'allred ms':>10}{'dense ms':>10}"
          f"{'bytes/epoch':>13}  match")
    for name, t, r, ok in rows:
        extra = "" if r is None else (f"{r['exchange_s'] * 1e3:9.2f}{r['spmm_s'] * 1e3:9.2f}"
                                      f"{r['allreduce_s'] * 1e3:10.2f}{r['dense_s'] * 1e3:10.2f}"
                                      f"{r['bytes_per_epoch_measured']:13,}  {ok}")
        print(f"{name:<26}{t * 1e3:10.2f}{t / pyg:8.2f}{extra}")


def minibatch(a, g, tmp, res):
    from partplan.models.stochastic import expected_volume
    from partplan.nn import normalize_adjacency
    from partplan.nn.train import train_gcn
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan
    k, spec = a.k, a.sampler
    print(f"\nB. mini-batch exchange, {g.name}, k={k}, sampler {spec}, {a.batches} batches per partition",
          flush=True)
    ahat = normalize_adjacency(g, "gcn")
    out = {}
    for model in ("hypergraph", "stochastic"):
        t0 = time.perf_counter()
        kw = {"sampler": spec} if model == "stochastic" else {}
        part = partition(g, k, model=model, seed=0, **kw)
        tpart = time.perf_counter() - t0
        plan = write_plan(build_plan(g, part, normalize="gcn"), tmp / f"{model}.plan")
        ev = expected_volume(ahat, part.part, spec, batches=a.batches, seed=424242)
        bpe = max(1, a.batches // 10)
        r = train_gcn(plan, backend="local", random_features=16, classes=a.classes, hidden=16,
                      epochs=a.batches // bpe, batches_per_epoch=bpe, sampler=spec, seed=3)
        out[model] = {"partition_s": tpart, "rows_per_batch": r["rows_per_batch_mean"],
                      "expected_rows_per_batch": ev["mean"], "expected_stderr": ev["stderr"],
                      "measured_over_expected": r["rows_per_batch_mean"] / ev["mean"],
                      "bytes_match": r["bytes_match"], "batches": r["batches"], "batch_s": r["batch_s"]}
    res["minibatch"] = out
    print(f"{'partition':<12}{'part s':>8}{'rows/batch':>12}{'expected':>10}{'meas/exp':>10}  bytes match")
    for model, o in out.items():
        print(f"{model:<12}{o['partition_s']:8.1f}{o['rows_per_batch']:12.1f}{o['expected_rows_per_batch']:10.1f}"
              f"{o['measured_over_expected']:10.3f}  {o['bytes_match']}")
    ratio = out["stochastic"]["rows_per_batch"] / out["hypergraph"]["rows_per_batch"]
    res["stochastic_over_hypergraph"] = ratio
    print(f"stochastic / full-batch hypergraph partition: {ratio:.3f} (target <= 0.90); "
          f"measured within {max(abs(o['measured_over_expected'] - 1) for o in out.values()) * 100:.2f}% of "
          f"expected_volume (target 3%)")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    run(main)
