"""``partplan demo``: one real graph, partplan's default beside the peers, exact communication.

Loads an embedded real graph (email-Enron by default, no download) and
partitions it into k parts with ``partplan partition``'s default pipeline
(preset "auto") and with METIS (graph model), Mt-KaHyPar (column-net
hypergraph, km1) and KaMinPar at the same k, plus two baselines (contiguous
blocks, balanced random). It counts the exact 1D SpMM communication of each
with :func:`partplan.analyze` and prints total volume, max send, max recv,
max(send, recv) — the bottleneck of an all-to-all exchange — and the
partitioning time, with ratios against METIS. Mt-KaHyPar's own km1 must equal
the analyzer's total volume (an independent check of the analyzer). Then it
plans the default partition for P ranks and executes the plan on P gloo
processes (bytes predicted vs measured), and trains a GCN from a plan.
Writes ``DIR/demo_heatmap_<method>.png``, ``DIR/demo_compare.png``, the plan it
executes (``DIR/demo_<P>.plan``), the training plan and its data
(``DIR/demo_polblogs_<P>.plan``, ``DIR/demo_polblogs.npz``) and ``DIR/demo.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from partplan._atomic import write_json_atomic
from partplan.jobs.args import nonneg_int, positive_int

# (key, what it runs); the key is the table's first column and demo.json's "methods" key
DEMO_METHODS = {
    "default": "partplan partition (preset auto)",
    "metis": "METIS, graph model",
    "hypergraph": "Mt-KaHyPar, km1",
    "kaminpar": "KaMinPar",
    "block": "contiguous rows",
    "random": "balanced random",
}
REFERENCE = "metis"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="partition an embedded real graph with the default pipeline and its peers; "
                     "compare the exact communication, then execute the default's plan",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        epilog="examples:\n  partplan demo\n  partplan demo --dataset polblogs -k 8 --out out-pb --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="DIR", default="out", help="output folder (default ./out)")
    p.add_argument("-k", "--k", type=positive_int, default=16, metavar="K", help="number of parts (default 16)")
    p.add_argument("--dataset", default="email-Enron",
                   help="dataset name or graph file (default email-Enron, embedded)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="seed of every method (default 0)")
    p.add_argument("--preset", default="DEFAULT",
                   help="Mt-KaHyPar preset (default DEFAULT; its partition can vary slightly between runs. "
                        "DETERMINISTIC repeats exactly but takes ~3x longer)")
    p.add_argument("-f", "--features", dest="f", type=positive_int, default=128, metavar="F",
                   help="feature width for the byte figures (default 128)")
    p.add_argument("--exec-ranks", type=nonneg_int, default=4, metavar="P",
                   help="then partition with the default pipeline for P ranks, plan it and execute the plan on "
                        "P gloo processes "
                        "(default 4; 0 skips)")
    p.add_argument("--train-ranks", type=nonneg_int, default=4, metavar="P",
                   help="then train a GCN on the embedded labeled polblogs graph from a plan on P gloo processes "
                        "(200 epochs; 0 skips it; default 4)")
    p.add_argument("--json", action="store_true", help="print demo.json on stdout instead of the table")
    p.set_defaults(func=run)


def _status(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


def _partition(graph, method: str, k: int, seed: int, preset: str):
    """(part, extra dict) for one demo method. ``default`` is ``partplan.partition(graph, k)``
    with no model, engine or preset (the auto pipeline); METIS and KaMinPar through the same
    API; Mt-KaHyPar (plain km1, no refinement) and the baselines through the method table
    (:mod:`partplan.bench.methods`)."""
    from partplan.partition.api import partition

    if method == "default":
        p = partition(graph, k, seed=seed)
        return p.part, {}
    if method == "metis":
        return partition(graph, k, model="graph", backend="metis", seed=seed).part, {}
    if method == "kaminpar":
        return partition(graph, k, backend="kaminpar", seed=seed).part, {}
    from partplan.bench.methods import run_method

    # Mt-KaHyPar through the method table: the engine's own partition, whose km1 it reports
    # (partition() may move rows afterwards, e.g. empty ones, which its km1 would not count)
    part, info = run_method(graph, method, k, seed=seed, **({"preset": preset} if method == "hypergraph" else {}))
    return part, ({"mtkahypar_km1": info["km1"]} if "km1" in info else {})


def _warm_up(seed: int) -> None:
    """The default pipeline on a 20 × 20 grid: its kernels are compiled (first run) or read from
    numba's cache here, so the table's times are the partitioning's own. Its starts are METIS and
    KaMinPar only: a Mt-KaHyPar call would change what plain Mt-KaHyPar returns later in this
    process (its seed does not reset all of its state; docs/design/planner.md)."""
    from partplan.datasets import grid2d
    from partplan.partition.pipeline.auto import auto_partition
    auto_partition(grid2d(20, 20), 4, seed=seed, starts=("metis", "kaminpar"))


def _table(graph, k: int, rows: dict, timings: dict, ref: str = REFERENCE) -> str:
    r = rows.get(ref)

    def ratio(m, key):
        if r is None or not r[key]:
            return ""
        return f" ({rows[m][key] / r[key]:.2f}x)"

    head = (f"{'method':<11} {'what':<33} {'max(send,recv)':>17} {'total volume':>19} {'max send':>8} "
            f"{'max recv':>8} {'messages':>8} {'compute imb.':>12} {'time s':>7}")
    lines = [(f"{graph.name}: n={graph.n:,} rows, nnz={graph.nnz:,}, k={k}; volumes in rows of H per 1D SpMM "
             f"(ratios vs {ref})"), head, "-" * len(head)]
    for m, s in rows.items():
        lines.append(f"{m:<11} {DEMO_METHODS[m]:<33} {s['max_send_recv']:>9,}{ratio(m, 'max_send_recv'):>8} "
                     f"{s['total_volume']:>11,}{ratio(m, 'total_volume'):>8} {s['max_send']:>8,} "
                     f"{s['max_recv']:>8,} {s['messages']:>8,} {s['compute_imbalance']:>12.3f} "
                     f"{timings[m]:>7.2f}")
    lines.append("max(send,recv) = the busiest rank's rows sent or received: what an all-to-all exchange waits "
                 "for; compute imb. = max/mean - 1 of nonzeros per part; time = partitioning, this process, kernels compiled")
    return "\n".join(lines)


def run(args) -> int:
    from partplan.errors import PartitionError

    if args.k < 2:
        raise PartitionError(f"--k must be at least 2 for a comparison, got {args.k}")
    if args.f < 1:
        raise PartitionError(f"-f must be >= 1, got {args.f}")
    from partplan.partition.engines.mtkahypar import check_preset
    check_preset(args.preset)            # before any method runs
    from partplan.io.outpath import check_output_dir, check_output_file, check_output_folder
    out = check_output_folder(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in _output_names(args):      # what the run will replace, checked before any work
        if name.endswith(".plan"):
            check_output_dir(out / name, kind="plan")     # a plan, an empty folder or nothing: never a user's folder
        else:
            check_output_file(out / name)
    from partplan._atomic import clean_stale, discard_temp, make_temp_dir, release_temp
    clean_stale(out / "demo")             # the staging folders of killed runs
    stage = make_temp_dir(out / "demo")   # every output is written here, then moved into `out` at the end
    release_temp(stage)   # its lock (flock) would block the plan writer's lock on the folder it writes in;
    try:                  # named by this running process, the folder is still no dead writer's to sweep
        doc = _demo(args, out, stage)
    finally:
        discard_temp(stage)
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    if not doc["check"]["equal"]:
        print("partplan demo: error: the analyzer disagrees with Mt-KaHyPar's km1", file=sys.stderr)
        return 1
    if any(doc.get(key) and not doc[key]["bytes_match"] for key in ("executed", "trained")):
        print("partplan demo: error: measured bytes differ from the plan's prediction", file=sys.stderr)
        return 1
    return 0


def _demo(args, out: Path, stage: Path) -> dict:
    """The demo's work, written into ``stage``; the finished outputs replace those of an earlier
    run in ``out`` only after the last one is written (an interrupted run leaves the earlier run's
    files as they were, never a mix of two runs). Returns demo.json's document."""
    from partplan.errors import PartitionError
    from partplan.metrics import analyze
    from partplan.plot import plot_compare, plot_volume

    from ._common import load_graph

    t_all = time.perf_counter()

    _status(f"loading {args.dataset} ...")
    t0 = time.perf_counter()
    graph = load_graph(args.dataset)
    _status(f"loaded {graph.name}: n={graph.n:,} nnz={graph.nnz:,} in {time.perf_counter() - t0:.2f} s")
    if args.k > graph.n:
        raise PartitionError(f"k={args.k} parts exceed n={graph.n} vertices of {graph.name}")

    _status("warming up the partitioner's kernels (compiled on a first run, read from the cache after) ...")
    _warm_up(args.seed)
    rows, stats, timings, extras = {}, {}, {}, {}
    for m in DEMO_METHODS:
        _status(f"{m}: partitioning into k={args.k} ...")
        t0 = time.perf_counter()
        part, extra = _partition(graph, m, args.k, args.seed, args.preset)
        timings[m] = time.perf_counter() - t0
        st = analyze(graph, part, args.k, f=args.f, name=f"{graph.name} / {m}")
        stats[m], rows[m], extras[m] = st, st.summary(), extra
        rows[m]["max_send_recv"] = max(st.max_send, st.max_recv)
        _status(f"{m}: done in {timings[m]:.2f} s; max(send, recv) {rows[m]['max_send_recv']:,}, "
                f"total volume {st.total_volume:,}")

    km1 = extras["hypergraph"].get("mtkahypar_km1")
    km1_ok = km1 == stats["hypergraph"].total_volume

    _status("drawing the heat maps ...")
    for m in DEMO_METHODS:
        plot_volume(stats[m], stage / f"demo_heatmap_{m}.png")
    plot_compare(stats, stage / "demo_compare.png", reference=REFERENCE,
                 title=f"{graph.name}, k={args.k}: communication per 1D SpMM by method")
    files = [str(out / name) for name in _output_names(args) if name.endswith((".png", ".json"))]
    ref = rows[REFERENCE]
    doc = {
        "dataset": args.dataset, "graph": {"name": graph.name, "n": graph.n, "nnz": graph.nnz,
                                           "symmetric": graph.is_symmetric(), "fingerprint": graph.fingerprint},
        "k": args.k, "f": args.f, "seed": args.seed, "mtkahypar_preset": args.preset,
        "methods": {m: {**rows[m], "partition_s": timings[m], **extras[m],
                        "ratio_vs_metis": {key: (rows[m][key] / ref[key] if ref[key] else None)
                                           for key in ("total_volume", "max_send_recv", "max_send",
                                                       "max_recv", "messages")}}
                    for m in DEMO_METHODS},
        "check": {"mtkahypar_km1": km1, "analyzer_total_volume": stats["hypergraph"].total_volume,
                  "equal": km1_ok},
        "files": files,
    }
    if args.exec_ranks:
        doc["executed"] = _execute(graph, args, stage, out)
    if args.train_ranks:
        doc["trained"] = _train(args, stage, out)
    doc["total_s"] = time.perf_counter() - t_all
    write_json_atomic(doc, stage / "demo.json")
    _move_into(stage, out)
    if not args.json:       # --json: printed by run()
        print(_table(graph, args.k, rows, timings))
        best = min((m for m in rows if m != "default"), key=lambda m: rows[m]["max_send_recv"])
        d, b = rows["default"], rows[best]
        print(f"default vs the best other method ({best}): max(send, recv) "
              f"{d['max_send_recv'] / b['max_send_recv']:.3f}x, total volume {d['total_volume'] / b['total_volume']:.3f}x")
        print()
        print(f"check: Mt-KaHyPar's own km1 = {km1:,}; analyzer total volume = "
              f"{stats['hypergraph'].total_volume:,} -> {'equal' if km1_ok else 'MISMATCH'}")
        if doc.get("executed"):
            print()
            print(_exec_table(doc["executed"]))
        if doc.get("trained"):
            t = doc["trained"]
            print()
            print(f"trained a 2-layer GCN on polblogs ({t['n']:,} blogs) from a plan on {t['ranks']} gloo processes, "
                  f"{t['epochs']} epochs: loss {t['losses'][0]:.3f} -> {t['losses'][-1]:.3f}, test accuracy "
                  f"{t['test_acc']:.3f}; bytes per epoch predicted {t['bytes_per_epoch_predicted']:,} measured "
                  f"{t['bytes_per_epoch_measured']:,} -> {'equal' if t['bytes_match'] else 'DIFFERENT'}; "
                  f"epoch {t['epoch_s'] * 1e3:.1f} ms")
        print("wrote " + ", ".join(files))
    _status(f"finished in {time.perf_counter() - t_all:.1f} s")
    return doc


def _output_names(args) -> list[str]:
    """The names a demo run writes in ``--out`` (demo.json last: it is what says which run the
    folder holds)."""
    names = [f"demo_heatmap_{m}.png" for m in DEMO_METHODS] + ["demo_compare.png"]
    if args.exec_ranks:
        names.append(f"demo_{args.exec_ranks}.plan")
    if args.train_ranks:
        names += [f"demo_polblogs_{args.train_ranks}.plan", "demo_polblogs.npz"]
    return names + ["demo.json"]


def _move_into(stage: Path, out: Path) -> None:
    """Every file and plan folder of ``stage`` into ``out``, replacing one of the same name (files
    by ``os.replace``, folders by :func:`partplan._atomic.swap_dir`: the earlier one is never lost
    half-way); demo.json last, so that it names the run whose files are there."""
    from partplan._atomic import swap_dir
    for item in sorted(stage.iterdir(), key=lambda q: (q.name == "demo.json", q.name)):
        target = out / item.name
        if item.is_dir() and target.is_dir() and not target.is_symlink():
            swap_dir(item, target)
        else:
            os.replace(item, target)


def _execute(graph, args, stage: Path, out: Path) -> dict:
    """Partition with the default pipeline for ``exec_ranks`` ranks, plan it, run the plan on
    as many gloo processes, and return the measured report (bytes predicted vs measured,
    aware vs oblivious vs bare exchange)."""
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan
    from partplan.runtime.spmm import run_spmm

    p = args.exec_ranks
    _status(f"executing: the default pipeline for {p} ranks, plan, {p} gloo processes ...")
    part = partition(graph, p, seed=args.seed)
    path = write_plan(build_plan(graph, part, f=args.f), stage / f"demo_{p}.plan")
    rep = run_spmm(path, nprocs=p, backend="gloo", f=args.f, repeat=7, compare=("oblivious", "bare"), timeout=60)
    rep["plan"] = str(path)
    return _relocated(rep, stage, out)


def _relocated(obj, stage: Path, out: Path):
    """``obj`` (a report: dicts, lists, strings) with every path in ``stage`` named where it ends, in ``out``."""
    if isinstance(obj, dict):
        return {k: _relocated(v, stage, out) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_relocated(v, stage, out) for v in obj]
    if isinstance(obj, str) and obj.startswith(str(stage)):
        return str(out) + obj[len(str(stage)):]
    return obj


def _train(args, stage: Path, out: Path) -> dict:
    """Partition polblogs for ``train_ranks`` ranks with a GCN-normalized plan,
    write its labels and split, and train on as many gloo processes."""
    from partplan import datasets
    from partplan.nn.data import labeled_dataset, write_data
    from partplan.nn.train import train_gcn
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan

    p = args.train_ranks
    _status(f"training: polblogs, the default pipeline for {p} ranks, --normalize gcn plan, GCN on {p} gloo "
            "processes ...")
    g = datasets.load_graph("polblogs").normalize(symmetrize=True)
    part = partition(g, p, seed=args.seed) if p > 1 else \
        np.zeros(g.n, dtype=np.int64)
    path = write_plan(build_plan(g, part, k=p, normalize="gcn"), stage / f"demo_polblogs_{p}.plan")
    d = labeled_dataset("polblogs")
    data = write_data(stage / "demo_polblogs.npz", d["x"], d["y"], d["train_mask"], d["val_mask"], d["test_mask"])
    rep = train_gcn(path, nprocs=p, data=data, epochs=200, seed=args.seed, timeout=60)
    rep["plan"] = str(path)
    return _relocated(rep, stage, out)


def _exec_table(r: dict) -> str:
    ok = "equal for every (rank, peer)" if r["bytes_match"] else "DIFFERENT"
    return "\n".join([
        (f"executed the plan on {r['ranks']} gloo processes ({r['layout']}, f={r['f']}, {r['dtype']}; medians of "
        f"{r['repeat']}, max over ranks)"),
        f"  bytes predicted {r['bytes_predicted']:,}  measured {r['bytes_measured']:,}  -> {ok}",
        (f"  exchange: sparsity-aware {r['exchange_s'] * 1e3:.2f} ms ({r['bytes_measured']:,} B) vs oblivious "
        f"{r['oblivious_exchange_s'] * 1e3:.2f} ms ({r['oblivious_bytes']:,} B) = "
        f"{r['aware_over_oblivious_exchange']:.2f}x; bare all_to_all_single {r['bare_a2a_s'] * 1e3:.2f} ms "
        f"(executor / bare = {r['exchange_over_bare']:.2f}x)"),
        (f"  step {r['step_s'] * 1e3:.2f} ms (median); its phases' own medians: gather {r['gather_s'] * 1e3:.2f}, "
        f"exchange {r['exchange_s'] * 1e3:.2f}, local SpMM {r['compute_s'] * 1e3:.2f} ms (the SpMM of the local "
        f"rows overlaps the exchange)")])
