#!/usr/bin/env python
"""End-to-end run past one process's memory: generate → partition →
distributed plan build → volume figures, with wall time and peak RSS per stage.

Stages (each timed; peak RSS = ``VmHWM``, reset per stage through
/proc/self/clear_refs where the kernel allows it):

1. **generate** — R-MAT ``scale`` (edge factor 16, symmetrized, no self-loops,
   permuted labels) written as a chunked graph by
   :func:`partplan.datasets.chunked_gen.rmat_chunked` (never whole in memory).
2. **partition** — :func:`partplan.partition.engines.stream.stream_partition`
   (Fennel, 3 passes: one stream + 2 restreams; O(n + k) state) into ``k``
   parts, saved as ``part.npy``.
3. **plan** — :func:`partplan.jobs.build.build_distributed`: the 1D plan of k
   ranks built by N ≤ k gloo processes (each builds a contiguous run of
   ranks; each reports its own per-stage peak RSS).
4. **volume** — the plan's figures read from its manifest (``stats``: total
   volume, max send/recv, in rows of H), and the same figures for the hash
   partition ``part[v] = v mod k`` (Graph500's cyclic 1D owner) WITHOUT a
   second plan: one pass over the chunks computes, with O(n·⌈k/64⌉) state
   (one bitmask of reader parts per column), the column-net volume matrix
   ``vol[q, u] = #{j : part[j] = q ≠ u, some row i of part u has a_ij ≠ 0}``,
   which is exactly the 1D plan's volume (conformal ownership). The same pass
   recomputes the streamed partition's figures as an independent check of
   the plan's manifest (they must be equal; exit status 1 if not).

Before anything the free disk space of the work directory is checked against
16 bytes × nnz × 2 for the chunk files (indices + the generator's bucket
temporaries) + 16 bytes × nnz for the plan, with nnz ≤ 2 · 16 · 2^scale; too
little → one clear error, exit status 2.

Usage::

    python benchmarks/scale_e2e.py --scale 20 --k 64 --nprocs 2 --chunks 16 \\
        --workdir /tmp/e2e [--keep] [--json out.json | --json -]

Output: a table (stages: wall s, this script's peak RSS, each builder
process's peak RSS, MiB = 2**20 bytes; then streamed vs hash volumes) and,
with ``--json FILE``, the same figures as JSON (``--json -``: JSON on stdout,
the table on stderr). The run's files go to a fresh ``e2e-*`` directory inside
``--workdir`` (default: the system temporary directory), removed at the end
unless ``--keep``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from partplan.bench.script import run

MiB = float(1 << 20)
EDGEFACTOR = 16


# ----------------------------------------------------------------------------- stages
class Stages:
    """:class:`partplan._process.Stages` with ``run(name, fn, ...)``: the
    stage's wall time (s) and peak RSS (bytes, VmHWM of this process)."""

    def __init__(self):
        from partplan._process import Stages as _Stages
        self._st = _Stages()
        self.rows, self.baseline, self.resettable = self._st.rows, self._st.baseline, self._st.resettable

    def run(self, name: str, fn, *a, **kw):
        self._st.start(name)
        out = fn(*a, **kw)
        self._st.stop()
        return out


# ----------------------------------------------------------------------------- column-net volume
def column_net_stats(graph_path, parts: dict[str, np.ndarray], k: int, *, f: int = 128,
                     dtype: str = "float32") -> dict:
    """The 1D plan's forward figures (:class:`partplan.metrics.stats.CommStats`
    summary: volumes in rows of H, edge cut, compute load …) of each partition
    in ``parts`` (name → int array[n] of part ids in [0, k)), from ONE pass over
    the chunks of a chunked graph, without building a plan.

    State: per partition a uint64[n, ⌈k/64⌉] bitmask of the parts reading each
    column (8·n·⌈k/64⌉ bytes) plus one chunk. Loops run over chunks and over
    parts, never over vertices or edges. Returns name → summary dict.
    """
    from partplan.io.chunked import chunk_info, read_chunk_rows
    from partplan.metrics.stats import CommStats
    info = chunk_info(graph_path)
    n = info.n
    W = -(-k // 64)
    masks = {name: np.zeros(n * W, dtype=np.uint64) for name in parts}
    load = {name: np.zeros(k, dtype=np.int64) for name in parts}
    cut = dict.fromkeys(parts, 0)
    one = np.uint64(1)
    for c in info.chunks:                                      # loop over chunks
        R = read_chunk_rows(graph_path, c.row_lo, c.row_hi, info=info, check=False)
        deg = np.diff(R.indptr)
        j = R.indices
        for name, part in parts.items():                       # loop over partitions
            prow = part[c.row_lo:c.row_hi]
            pu = np.repeat(prow, deg).astype(np.int64)         # part of each nonzero's row
            np.bitwise_or.at(masks[name], j * W + (pu >> 6), np.left_shift(one, (pu & 63).astype(np.uint64)))
            load[name] += np.bincount(prow, weights=deg, minlength=k).astype(np.int64)
            cut[name] += int(np.count_nonzero(part[j] != pu))
            del pu
        del R, j, deg
    out = {}
    for name, part in parts.items():
        mask = masks.pop(name).reshape(n, W)
        vol = np.zeros((k, k), dtype=np.int64)                 # vol[q, u]: rows q → u
        for u in range(k):                                     # loop over parts
            sel = ((mask[:, u >> 6] >> np.uint64(u & 63)) & one).astype(bool)
            vol[:, u] = np.bincount(part[sel], minlength=k)
        np.fill_diagonal(vol, 0)
        del mask
        st = CommStats(k=k, n=n, nnz=info.nnz, f=f, dtype=dtype, volume=vol,
                       part_sizes=np.bincount(part, minlength=k).astype(np.int64),
                       compute_load=load[name], edge_cut=cut[name])
        out[name] = st.summary()
    return out


# ----------------------------------------------------------------------------- helpers
def _disk_check(where: Path, scale: int) -> dict:
    """Refuse (SystemExit 2, one line) when the work directory's file system
    cannot hold the chunk files and the plan; returns the estimate (bytes)."""
    nnz = 2 * EDGEFACTOR * (1 << scale)                   # upper bound: symmetrized edge tuples
    need_chunks = 16 * nnz * 2
    need_plan = 16 * nnz
    probe = where
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    est = {"nnz_upper_bound": nnz, "chunk_bytes_estimate": need_chunks, "plan_bytes_estimate": need_plan,
           "free_bytes": free}
    if free < need_chunks + need_plan:
        print(f"scale_e2e: error: {probe} has {free / 2**30:.1f} GiB free; scale {scale} needs about "
                         f"{need_chunks / 2**30:.1f} GiB for the chunk files (16 B x nnz x 2, nnz <= {nnz}) + "
                         f"{need_plan / 2**30:.1f} GiB for the plan: use --workdir on a larger file system or a "
                         f"smaller --scale", file=sys.stderr)
        raise SystemExit(2)
    return est


def _fmt_table(res: dict) -> str:
    L = []
    a = res["args"]
    L.append(f"R-MAT scale {a['scale']} (n = {res['n']}, nnz = {res['nnz']}), k = {a['k']} parts, "
             f"{a['nprocs']} builder processes, {a['chunks']} chunks")
    nb = a["nprocs"]
    L.append("")
    L.append(f"{'stage':<11}{'wall s':>9}{'script peak':>13}" + "".join(f"{'proc ' + str(r) + ' peak':>14}"
                                                                        for r in range(nb)) + "   MiB")
    for s in res["stages"]:
        procs = s.get("builder_peak_rss_bytes") or []
        L.append(f"{s['stage']:<11}{s['seconds']:9.1f}{s['peak_rss_bytes'] / MiB:13.1f}"
                 + "".join(f"{x / MiB:14.1f}" for x in procs))
    tot = sum(s["seconds"] for s in res["stages"])
    L.append(f"{'total':<11}{tot:9.1f}")
    b = res.get("builder")
    if b:
        L.append("")
        L.append("builder processes (plan stage): parts, peak RSS per internal stage (MiB), seconds")
        for r in b["per_rank"]:
            L.append(f"  proc {r['rank']} parts [{r['parts'][0]}, {r['parts'][1]}): baseline "
                     f"{r['baseline_rss_bytes'] / MiB:.0f}; "
                     + ", ".join(f"{x['stage']} {x['peak_rss_bytes'] / MiB:.0f}/{x['seconds']:.1f}s"
                                 for x in r["stages"]))
    v = res["volume"]
    L.append("")
    L.append(f"{'figure (rows of H)':<22}{'streamed':>14}{'hash v%k':>14}{'ratio':>9}")
    for key in ("total_volume", "max_send", "max_recv", "messages", "edge_cut", "max_compute_load",
                "compute_imbalance", "size_imbalance", "time_estimate_s"):
        x, y = v["streamed"][key], v["hash"][key]
        ratio = x / y if y else float("nan")
        fx = f"{x:14.4g}" if isinstance(x, float) else f"{x:14d}"
        fy = f"{y:14.4g}" if isinstance(y, float) else f"{y:14d}"
        L.append(f"{key:<22}{fx}{fy}{ratio:9.3f}")
    L.append(f"manifest figures == chunk-pass recount of the streamed partition: {v['check']['ok']}"
             + ("" if v["check"]["ok"] else f"  MISMATCH {v['check']['diff']}"))
    return "\n".join(L)


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, required=True, help="R-MAT scale: n = 2**scale, 16·n edge tuples")
    ap.add_argument("--k", type=int, required=True, help="parts = plan ranks")
    ap.add_argument("--nprocs", type=int, default=2, help="builder processes, 1 <= N <= k (default 2)")
    ap.add_argument("--chunks", type=int, default=16, help="row chunks of the graph (default 16)")
    ap.add_argument("--workdir", help="where the run's e2e-* directory goes (default: system temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the run's directory (graph, part.npy, plan)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eps", type=float, default=0.03, help="balance tolerance of the partitioner")
    ap.add_argument("--passes", type=int, default=3, help="streaming passes (default 3)")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds for the plan build")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON here ('-': stdout, table on stderr)")
    a = ap.parse_args(argv)
    if not a.timeout > 0:
        ap.error(f"argument --timeout: expected a number of seconds > 0, got {a.timeout}")
    for name, lo in (("scale", 1), ("k", 1), ("nprocs", 1), ("chunks", 1), ("passes", 1)):
        if getattr(a, name) < lo:
            ap.error(f"--{name} must be >= {lo}")
    if a.scale > 31:
        ap.error("--scale must be <= 31")
    if a.nprocs > a.k:
        ap.error(f"--nprocs {a.nprocs} > --k {a.k}: the distributed build needs processes <= plan ranks")
    if a.k > (1 << a.scale):
        ap.error(f"--k {a.k} exceeds n = 2**{a.scale}")

    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.io.chunked import chunk_info
    from partplan.partition.engines.stream import stream_partition
    from partplan.jobs.build import build_distributed

    base = Path(a.workdir) if a.workdir else Path(tempfile.gettempdir())
    disk = _disk_check(base, a.scale)
    made_base = not base.exists()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"e2e-s{a.scale}-k{a.k}-", dir=base))
    out_txt = sys.stderr if a.json == "-" else sys.stdout
    log = (lambda s: print(s, file=sys.stderr, flush=True))
    st = Stages()
    rc = 0
    try:
        log(f"[1/4] generate R-MAT scale {a.scale} into {work} ({a.chunks} chunks)")
        gp = st.run("generate", rmat_chunked, a.scale, EDGEFACTOR, seed=a.seed, path=work / "graph.chunked",
                    chunks=a.chunks)
        info = chunk_info(gp)
        log(f"      n = {info.n}, nnz = {info.nnz}, {st.rows[-1]['seconds']:.1f} s")

        log(f"[2/4] stream_partition fennel, k = {a.k}, {a.passes} passes")
        pstats: dict = {}

        def partition():
            part = stream_partition(gp, a.k, eps=a.eps, method="fennel", passes=a.passes, seed=a.seed,
                                    progress=lambda s: log("      " + s), stats=pstats)
            np.save(work / "part.npy", part)
        st.run("partition", partition)

        log(f"[3/4] distributed plan build, {a.nprocs} processes")
        build = st.run("plan", build_distributed, gp, work / "part.npy", a.k, work / "plan.plan",
                       nprocs=a.nprocs, timeout_s=a.timeout, f=128)
        st.rows[-1]["builder_peak_rss_bytes"] = [r["peak_rss_bytes"] for r in build["per_rank"]]

        log("[4/4] volume figures: manifest + one chunk pass (streamed recount, hash v mod k)")

        def volume():
            manifest = json.loads((work / "plan.plan" / "manifest.json").read_text())
            part = np.load(work / "part.npy").astype(np.int32)
            hashp = (np.arange(info.n, dtype=np.int64) % a.k).astype(np.int32)
            cn = column_net_stats(gp, {"streamed": part, "hash": hashp}, a.k, f=manifest["f"],
                                  dtype=manifest["dtype"])
            keys = ("total_volume", "max_send", "max_recv", "messages", "edge_cut", "max_compute_load")
            diff = {kk: [manifest["stats"][kk], cn["streamed"][kk]] for kk in keys
                    if manifest["stats"][kk] != cn["streamed"][kk]}
            return {"streamed": manifest["stats"], "hash": cn["hash"], "streamed_recount": cn["streamed"],
                    "check": {"ok": not diff, "diff": diff}}
        vol = st.run("volume", volume)
        if not vol["check"]["ok"]:
            rc = 1
        res = {"args": vars(a), "n": info.n, "nnz": info.nnz, "disk": disk, "workdir": str(work),
               "kept": bool(a.keep), "script_baseline_rss_bytes": st.baseline,
               "peak_rss_reset_per_stage": st.resettable, "stages": st.rows,
               "partition_stats": pstats, "builder": {kk: build[kk] for kk in ("per_rank", "total_volume",
                                                                                "processes", "ranks")},
               "volume": vol}
        print(_fmt_table(res), file=out_txt)
        if a.json == "-":
            print(json.dumps(res, indent=1, default=str))
        elif a.json:
            Path(a.json).write_text(json.dumps(res, indent=1, default=str) + "\n")
    finally:
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
            if made_base:
                shutil.rmtree(base, ignore_errors=True)
    return rc


if __name__ == "__main__":
    run(main)
