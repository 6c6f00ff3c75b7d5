#!/usr/bin/env python
"""The CUDA path, for a machine with a GPU: local SpMM GF/s (torch CSR on CUDA
vs scipy on CPU), NCCL with one rank end to end against scipy, and the
DistSpMM forward/backward on CUDA tensors. Prints one JSON document."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def med(fn, repeat=9, sync=None):
    fn()
    ts = []
    for _ in range(repeat):
        if sync:
            sync()
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> int:
    import torch
    import partplan
    from partplan.plan import build_plan, write_plan
    from partplan.runtime.ops import TorchOps
    from partplan.runtime.spmm import run_spmm, random_rows
    out = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    graphs = {"email-Enron": partplan.datasets.load("email-Enron")}
    from partplan.datasets.generators import rmat
    graphs["rmat18"] = rmat(18, seed=1).normalize(symmetrize=True, self_loops="remove")
    kern = []
    for name, g in graphs.items():
        A = g.to_scipy()
        for f in (64, 128):
            for dt in ("float32", "float64"):
                X = np.random.default_rng(0).standard_normal((g.n, f)).astype(dt)
                Ad = A.astype(dt)
                t_cpu = med(lambda: Ad @ X, 5)
                ops = TorchOps(dt, "cuda", "torch")
                M = ops.matrix(A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data, A.shape)
                Xd = torch.from_numpy(X).cuda()
                o = ops.empty(g.n, f)
                t_gpu = med(lambda: ops.spmm(M, Xd, o), 20, torch.cuda.synchronize)
                err = float(np.abs(o.cpu().numpy() - (A @ X.astype(np.float64))).max())
                gf = 2 * g.nnz * f / 1e9
                kern.append({"graph": name, "nnz": g.nnz, "f": f, "dtype": dt, "scipy_cpu_gflops": gf / t_cpu,
                             "torch_cuda_gflops": gf / t_gpu, "speedup": t_cpu / t_gpu, "max_abs_err": err})
    out["spmm_kernel"] = kern
    g = graphs["email-Enron"]
    with tempfile.TemporaryDirectory() as tmp:
        path = write_plan(build_plan(g, np.zeros(g.n, dtype=np.int64), 1), Path(tmp) / "one.plan")
        rep = run_spmm(path, nprocs=1, backend="nccl", f=64, output=Path(tmp) / "Z.npy", repeat=9)
        Z = np.load(Path(tmp) / "Z.npy")
        ref = g.to_scipy() @ random_rows(np.arange(g.n), 64, 0, "float64")
        rep["max_rel_err_vs_scipy"] = float(np.abs(Z - ref).max() / np.abs(ref).max())
        out["nccl_one_rank"] = rep
        for p in (2, 4):  # several ranks on one GPU through NCCL is not supported; gloo on the 16 CPU cores
            part = (np.arange(g.n) * p // g.n).astype(np.int64)
            if os.path.isfile(f"gpu_in/email-Enron-{p}.npy"):
                part = np.load(f"gpu_in/email-Enron-{p}.npy")
            pp = write_plan(build_plan(g, part, p), Path(tmp) / f"e{p}.plan")
            out[f"gloo_p{p}_f64"] = run_spmm(pp, nprocs=p, backend="gloo", f=64, repeat=15,
                                             compare=("oblivious", "bare"), threads=2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
