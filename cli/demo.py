"""``partplan demo``: one real graph, four partitions, exact communication.

Loads an embedded real graph (email-Enron by default, no download),
partitions it with contiguous blocks, balanced random, METIS (graph model,
pymetis) and Mt-KaHyPar (column-net hypergraph model, km1 objective), counts
the exact 1D SpMM communication of each with :func:`partplan.analyze`, and
prints a comparison table with ratios against METIS. It also checks the
analyzer against an independent oracle: Mt-KaHyPar's own km1 of its partition
must equal the analyzer's total volume. Writes
``DIR/demo_heatmap_<method>.png``, ``DIR/demo_compare.png`` and
``DIR/demo.json``.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from partplan._atomic import write_json_atomic
from partplan.jobs.args import positive_int

DEMO_METHODS = ("block", "random", "metis", "hypergraph")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="partition an embedded real graph 4 ways and compare the exact communication",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    p.add_argument("--out", metavar="DIR", default="out", help="output folder (default ./out)")
    p.add_argument("-k", "--k", type=positive_int, default=16, metavar="K", help="number of parts (default 16)")
    p.add_argument("--dataset", default="email-Enron",
                   help="dataset name or graph file (default email-Enron, embedded)")
    p.add_argument("--seed", type=int, default=0, help="seed of random / METIS / Mt-KaHyPar (default 0)")
    p.add_argument("--preset", default="DEFAULT",
                   help="Mt-KaHyPar preset (default DEFAULT; its partition can vary slightly between runs. "
                        "DETERMINISTIC repeats exactly but takes ~3x longer)")
    p.add_argument("-f", "--features", dest="f", type=positive_int, default=128, metavar="F",
                   help="feature width for the byte figures (default 128)")
    p.add_argument("--exec-ranks", type=int, default=4, metavar="P",
                   help="then plan the Mt-KaHyPar partition for P ranks and execute it on P gloo processes "
                        "(default 4; 0 skips)")
    p.add_argument("--train-ranks", type=int, default=4, metavar="P",
                   help="then train a GCN on the embedded labeled polblogs graph from a plan on P gloo processes "
                        "(200 epochs; 0 skips it; default 4)")
    p.add_argument("--json", action="store_true", help="print demo.json on stdout instead of the table")
    p.set_defaults(func=run)


def _status(msg: str) -> None:
    print(f"[demo] {msg}", file=sys.stderr, flush=True)


def _partition(graph, method: str, k: int, seed: int, preset: str):
    """(part, extra dict) for one demo method; a thin call through the one
    method table (:mod:`partplan.partition.methods`)."""
    from partplan.partition.methods import run_method

    part, info = run_method(graph, method, k, seed=seed, preset=preset)
    return part, ({"mtkahypar_km1": info["km1"]} if "km1" in info else {})


def _table(graph, k: int, rows: dict, timings: dict, ref: str = "metis") -> str:
    r = rows.get(ref)

    def ratio(m, key):
        if r is None or not r[key]:
            return ""
        return f" ({rows[m][key] / r[key]:.2f}x)"

    head = (f"{'method':<11} {'total volume':>20} {'max send':>16} {'max recv':>16} {'messages':>9} "
            f"{'max msgs/part':>13} {'compute imb.':>12} {'cut nnz':>9} {'part. s':>8}")
    lines = [f"{graph.name}: n={graph.n:,} rows, nnz={graph.nnz:,}, k={k}; volumes in rows of H "
             f"(ratios vs {ref})", head, "-" * len(head)]
    for m, s in rows.items():
        lines.append(f"{m:<11} {s['total_volume']:>11,}{ratio(m, 'total_volume'):>9} "
                     f"{s['max_send']:>7,}{ratio(m, 'max_send'):>9} {s['max_recv']:>7,}{ratio(m, 'max_recv'):>9} "
                     f"{s['messages']:>9,} {max(s['max_send_messages'], s['max_recv_messages']):>13} "
                     f"{s['compute_imbalance']:>12.3f} {s['edge_cut']:>9,} {timings[m]:>8.2f}")
    lines.append("cut nnz = nonzeros a_ij with part[i] != part[j] (what METIS minimizes; not the volume); "
                 "compute imb. = max/mean - 1 of nonzeros per part")
    return "\n".join(lines)


def run(args) -> int:
    from partplan.errors import PartitionError
    from partplan.metrics import analyze
    from partplan.plot import plot_compare, plot_volume

    from ._common import load_graph

    if args.k < 2:
        raise PartitionError(f"--k must be at least 2 for a comparison, got {args.k}")
    if args.f < 1:
        raise PartitionError(f"-f must be >= 1, got {args.f}")
    from partplan.io.outpath import check_output_folder
    out = check_output_folder(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()

    _status(f"loading {args.dataset} ...")
    t0 = time.perf_counter()
    graph = load_graph(args.dataset)
    _status(f"loaded {graph.name}: n={graph.n:,} nnz={graph.nnz:,} in {time.perf_counter() - t0:.2f} s")
    if args.k > graph.n:
        raise PartitionError(f"k={args.k} parts exceed n={graph.n} vertices of {graph.name}")

    rows, stats, timings, extras = {}, {}, {}, {}
    for m in DEMO_METHODS:
        _status(f"{m}: partitioning into k={args.k} ...")
        t0 = time.perf_counter()
        part, extra = _partition(graph, m, args.k, args.seed, args.preset)
        timings[m] = time.perf_counter() - t0
        st = analyze(graph, part, args.k, f=args.f, name=f"{graph.name} / {m}")
        stats[m], rows[m], extras[m] = st, st.summary(), extra
        _status(f"{m}: done in {timings[m]:.2f} s; total volume {st.total_volume:,}, max send {st.max_send:,}")

    km1 = extras["hypergraph"].get("mtkahypar_km1")
    km1_ok = km1 == stats["hypergraph"].total_volume

    _status("drawing the heat maps ...")
    files = []
    for m in DEMO_METHODS:
        files.append(str(plot_volume(stats[m], out / f"demo_heatmap_{m}.png")))
    files.append(str(plot_compare(stats, out / "demo_compare.png", reference="metis",
                                  title=f"{graph.name}, k={args.k}: communication per 1D SpMM by method")))
    ref = rows["metis"]
    doc = {
        "dataset": args.dataset, "graph": {"name": graph.name, "n": graph.n, "nnz": graph.nnz,
                                           "symmetric": graph.is_symmetric(), "fingerprint": graph.fingerprint},
        "k": args.k, "f": args.f, "seed": args.seed, "mtkahypar_preset": args.preset,
        "methods": {m: {**rows[m], "partition_s": timings[m], **extras[m],
                        "ratio_vs_metis": {key: (rows[m][key] / ref[key] if ref[key] else None)
                                           for key in ("total_volume", "max_send", "max_recv", "messages")}}
                    for m in DEMO_METHODS},
        "check": {"mtkahypar_km1": km1, "analyzer_total_volume": stats["hypergraph"].total_volume,
                  "equal": km1_ok},
        "files": files,
        "total_s": time.perf_counter() - t_all,
    }
    if args.exec_ranks:
        doc["executed"] = _execute(graph, args, out)
    if args.train_ranks:
        doc["trained"] = _train(args, out)
    files.append(str(write_json_atomic(doc, out / "demo.json")))
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        print(_table(graph, args.k, rows, timings))
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
    if not km1_ok:
        print("partplan demo: error: the analyzer disagrees with Mt-KaHyPar's km1", file=sys.stderr)
        return 1
    if any(doc.get(key) and not doc[key]["bytes_match"] for key in ("executed", "trained")):
        print("partplan demo: error: measured bytes differ from the plan's prediction", file=sys.stderr)
        return 1
    return 0


def _execute(graph, args, out: Path) -> dict:
    """Plan the hypergraph partition for ``exec_ranks`` ranks, run it on as many gloo
    processes, and return the measured report (bytes predicted vs measured,
    aware vs oblivious vs bare exchange)."""
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan
    from partplan.runtime.spmm import run_spmm

    p = args.exec_ranks
    _status(f"executing: Mt-KaHyPar (column-net hypergraph) for {p} ranks, plan, {p} gloo processes ...")
    part = partition(graph, p, model="hypergraph", seed=args.seed, preset=args.preset)
    path = write_plan(build_plan(graph, part, f=args.f), out / f"demo_{p}.plan")
    rep = run_spmm(path, nprocs=p, backend="gloo", f=args.f, repeat=7, compare=("oblivious", "bare"), timeout=60)
    rep["plan"] = str(path)
    return rep


def _train(args, out: Path) -> dict:
    """Partition polblogs for ``train_ranks`` ranks with a GCN-normalized plan,
    write its labels and split, and train on as many gloo processes."""
    from partplan import datasets
    from partplan.nn.data import labeled_dataset, write_data
    from partplan.nn.train import train_gcn
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan

    p = args.train_ranks
    _status(f"training: polblogs, Mt-KaHyPar for {p} ranks, --normalize gcn plan, GCN on {p} gloo processes ...")
    g = datasets.load_graph("polblogs").normalize(symmetrize=True)
    part = partition(g, p, model="hypergraph", seed=args.seed, preset=args.preset) if p > 1 else \
        np.zeros(g.n, dtype=np.int64)
    path = write_plan(build_plan(g, part, k=p, normalize="gcn"), out / f"demo_polblogs_{p}.plan")
    d = labeled_dataset("polblogs")
    data = write_data(out / "demo_polblogs.npz", d["x"], d["y"], d["train_mask"], d["val_mask"], d["test_mask"])
    rep = train_gcn(path, nprocs=p, data=data, epochs=200, seed=args.seed, timeout=60)
    rep["plan"] = str(path)
    return rep


def _exec_table(r: dict) -> str:
    ok = "equal for every (rank, peer)" if r["bytes_match"] else "DIFFERENT"
    return "\n".join([
        f"executed the plan on {r['ranks']} gloo processes ({r['layout']}, f={r['f']}, {r['dtype']}; medians of "
        f"{r['repeat']}, max over ranks)",
        f"  bytes predicted {r['bytes_predicted']:,}  measured {r['bytes_measured']:,}  -> {ok}",
        f"  exchange: sparsity-aware {r['exchange_s'] * 1e3:.2f} ms ({r['bytes_measured']:,} B) vs oblivious "
        f"{r['oblivious_exchange_s'] * 1e3:.2f} ms ({r['oblivious_bytes']:,} B) = "
        f"{r['aware_over_oblivious_exchange']:.2f}x; bare all_to_all_single {r['bare_a2a_s'] * 1e3:.2f} ms "
        f"(executor / bare = {r['exchange_over_bare']:.2f}x)",
        f"  step {r['step_s'] * 1e3:.2f} ms = gather {r['gather_s'] * 1e3:.2f} + exchange {r['exchange_s'] * 1e3:.2f}"
        f" + local SpMM {r['compute_s'] * 1e3:.2f} ms"])
