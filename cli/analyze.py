"""``partplan analyze``: exact communication of a partition (1D, 1.5D or 2D).

Thin layer over :func:`partplan.metrics.analyze` (and ``analyze_15d`` /
``analyze_2d``); the partition comes from a file
(:func:`partplan.plan.partitions.read_partition_file`) or from a thin call into a
partitioner (pymetis, mtkahypar or a baseline).

Examples::

    partplan analyze graph.mtx --partition graph.part.16
    partplan analyze email-Enron --method hypergraph -k 16 --json
    partplan analyze graph.mtx --method metis -k 8 --layout 1.5d:2 --plot vol.png
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

from partplan.errors import PartitionError
from partplan.io.trust import printable
from ._common import add_weight_option, load_graph
from ._common import nonneg_float as _nonneg_float
from ._common import positive_int as _positive_int

from partplan.bench.methods import METHOD_NAMES as METHODS  # the one method table
from partplan.partition.options import DEFAULT_IMBALANCE


# --------------------------------------------------------------------------- parsing helpers
def parse_layout(text: str) -> str:
    """argparse type: a layout string (sizes are checked once -k is known)."""
    from partplan.layouts import check_spec
    try:
        return check_spec(text)
    except PartitionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dtype(text: str) -> str:
    from partplan.metrics import dtype_bytes

    try:
        dtype_bytes(text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r} (e.g. float32, float16, bfloat16, float64)") \
            from None
    return text


# --------------------------------------------------------------------------- graph and partition
def make_partition(graph, method: str, k: int, *, seed: int = 0, imbalance: float = DEFAULT_IMBALANCE,
                   preset: str = "DEFAULT") -> np.ndarray:
    """Partition ``graph`` into ``k`` parts with ``method`` (a thin call; see
    :mod:`partplan.bench.methods`)."""
    from partplan.bench.methods import run_method

    if k > graph.n:
        raise PartitionError(f"k={k} parts exceed n={graph.n} vertices of {graph.name}")
    return run_method(graph, method, k, seed=seed, imbalance=imbalance, preset=preset)[0]


# --------------------------------------------------------------------------- command
def register(subparsers) -> None:
    p = subparsers.add_parser(
        "analyze", help="exact communication volume of a partition (1D / 1.5D / 2D SpMM)",
        description="Count exactly what one distributed SpMM Z = A·H sends for a row partition: the k×k "
                    "volume matrix (rows of H), per-part send/recv, messages, compute load, the "
                    "sparsity-oblivious volume and an α-β time estimate. The backward pass A^T·G is "
                    "analyzed too when A is not symmetric.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  partplan analyze graph.mtx --partition graph.part.16\n"
               "  partplan analyze email-Enron --method hypergraph -k 16 --json\n"
               "  partplan analyze graph.mtx --method metis -k 8 --layout 1.5d:2 --plot vol.png\n"
               "  partplan analyze graph.mtx --method random -k 16 --layout 2d:4x4\n"
               "  partplan analyze email-Enron --method metis -k 64 --topology tree:4x16 --route domain --json")
    p.add_argument("graph", metavar="GRAPH", help="graph file (.mtx, .graph, .npz, .parquet, edge list, ...) "
                                                  "or a dataset name (see `partplan datasets list`)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--partition", metavar="FILE",
                     help="partition file: one part id per line (METIS .part.K), .npy, a Parquet/Arrow/CSV "
                          "column, a DGL partition folder or config JSON, a PyG node_map.pt, or a CAGNET "
                          ".part-sizes file (kind detected)")
    src.add_argument("--method", choices=METHODS, help="partition on the fly (thin call into the partitioner)")
    p.add_argument("-k", "--k", type=_positive_int, metavar="K",
                   help="number of ranks (row blocks × replicas for 1.5d); required with --method unless "
                        "--layout 2d:RxC gives R·C; with --partition defaults to the file's row blocks "
                        "(K of a .part.K name or a DGL / PyG / CAGNET partition's own part count, else max id + 1) times the "
                        "layout's replication")
    p.add_argument("--column", metavar="NAME", help="column of a Parquet/Arrow/CSV partition file")
    p.add_argument("--seed", type=int, help="seed for random / metis / hypergraph (default 0)")
    p.add_argument("--imbalance", type=_nonneg_float, metavar="E",
                   help=f"allowed load imbalance for metis / hypergraph (default {DEFAULT_IMBALANCE})")
    p.add_argument("--preset", metavar="P",
                   help="Mt-KaHyPar preset for --method hypergraph: DEFAULT (default), QUALITY, "
                        "DETERMINISTIC, ...")
    p.add_argument("--fetch", action="store_true",
                   help="GRAPH is a registered dataset not yet downloaded: fetch it first")
    p.add_argument("--symmetrize", action="store_true", help="use the pattern union of A and A^T (the larger weight where both hold one) instead of A")
    add_weight_option(p)
    p.add_argument("--self-loops", choices=("keep", "add", "remove"), default="keep",
                   help="diagonal: keep as read, add (GCN's A + I) or remove (default keep)")
    p.add_argument("-f", "--features", dest="f", type=_positive_int, default=128, metavar="F",
                   help="feature width: columns of H (default 128); used for bytes")
    p.add_argument("--dtype", type=_dtype, default="float32", help="element type of H (default float32)")
    p.add_argument("--latency", dest="alpha", type=_nonneg_float, metavar="S",
                   help="α of the α-β time estimate: seconds per message (default 1e-5)")
    p.add_argument("--byte-time", dest="beta", type=_nonneg_float, metavar="S",
                   help="β of the α-β time estimate: seconds per byte (default 1e-10)")
    p.add_argument("--layout", type=parse_layout, default=None, metavar="L",
                   help="1d, 1.5d:C (k/C row blocks × C replicas = k ranks), 2d:RxC (R·C = k ranks) or "
                        "routed:domain:D / routed:source:D (through domains of D ranks); default: "
                        "a saved partition's or plan's own layout (and ranks), else 1d")
    p.add_argument("--json", action="store_true", help="print all figures as JSON on stdout")
    p.add_argument("--plot", metavar="PNG", help="write the volume heat map and send/recv bars to PNG")
    p.add_argument("--save-partition", metavar="FILE", help="write the partition used (format from the name)")
    from ._topology import add_topology_args
    add_topology_args(p)
    p.set_defaults(func=run)


def _check_options(args) -> None:
    given = {name for name in ("seed", "imbalance", "preset") if getattr(args, name) is not None}
    if args.partition is not None:
        if given:
            raise PartitionError(f"--{sorted(given)[0]} applies to --method only, not to --partition")
        return
    from partplan.bench.methods import check_method_options
    check_method_options(args.method, given)
    if args.column is not None:
        raise PartitionError("--column applies to --partition table files only")


def _layout_table(summary: dict) -> str:
    """A layout's summary as a two-column table; the volumes say what they count
    (:func:`partplan.plan.figures.volume_rows`: in 1.5D a rank's maximum counts its all-reduce rows,
    which the exchange total does not, so it can exceed that total)."""
    from partplan.plan.figures import volume_rows
    named = dict(volume_rows(summary))
    rows = [(a, named[a] if a in named else f"{v:.4g}" if isinstance(v, float) else str(v))
            for a, v in summary.items()]
    w = max(len(a) for a, _ in rows)
    return "\n".join(f"{a:<{w}}  {v}" for a, v in rows)


def run(args) -> int:
    from partplan.io.partfile import check_part_k_name, write_partition
    from partplan.layouts import parse_layout as layout_of
    from partplan.layouts import spec_ranks
    from partplan.metrics import analyze
    from partplan.metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE
    from partplan.parts import as_partition

    _check_options(args)
    from partplan.io.outpath import check_output_file
    if args.plot is not None:
        check_output_file(args.plot, kind="png")
    if args.save_partition is not None:   # never over the graph or the partition file read
        check_output_file(args.save_partition, kind="partition", inputs=[args.graph, args.partition])
        if args.k is not None and (args.layout is not None or args.partition is None):   # again once known
            check_part_k_name(args.save_partition, layout_of(args.layout or "1d", args.k).row_blocks)
    spec = args.layout
    alpha = DEFAULT_ALPHA_S if args.alpha is None else args.alpha
    beta = DEFAULT_BETA_S_PER_BYTE if args.beta is None else args.beta
    timing: dict[str, float] = {}
    from ._topology import TopologyOptions, print_topology
    topts = TopologyOptions(args, layout=spec)  # bad --topology / --route / --map: one error, before any work

    t0 = time.perf_counter()
    graph = read = load_graph(args.graph, fetch=args.fetch, weight=args.weight)
    if args.symmetrize or args.self_loops != "keep":
        graph = graph.normalize(symmetrize=args.symmetrize, self_loops=args.self_loops)
    timing["load_s"] = time.perf_counter() - t0

    k = args.k  # ranks
    if k is None and spec is not None:
        k = spec_ranks(spec)  # 2d:RxC fixes R·C ranks by itself
    topts.check_ranks(k)
    t0 = time.perf_counter()
    if args.partition is not None:
        source = {"file": str(args.partition)}
        # METIS .part.K, .npy, .pt, tables, DGL folders, PyG node_map.pt, CAGNET .part-sizes, partplan's own
        from partplan.plan.partitions import read_partition_file
        from partplan.errors import PartplanError
        try:
            P = read_partition_file(args.partition, graph, column=args.column)
        except PartplanError as exc:   # a partition of the graph as read: --symmetrize / --self-loops keep its rows
            if read is graph:
                raise
            try:
                P = read_partition_file(args.partition, read, column=args.column)
            except PartplanError:
                raise exc from None
        part, b = P.part, P.row_blocks
        if spec is None:       # a saved partition's or plan's own layout and ranks (a bare file's: 1d)
            from partplan.layouts import spec_from_params
            spec = spec_from_params(P.layout or "1d", getattr(P, "layout_params", None))
            k = int(P.ranks) if k is None else k
        owner = getattr(P, "owner", None)       # a saved decoupled partition: its owners send the rows of H
        lay = layout_of(spec, k) if k is not None else layout_of(spec, row_blocks=b)
        if owner is not None and (not lay.supports_owner or getattr(args, "map_method", None) not in (None, "none")):
            raise PartitionError(f"{args.partition}: a decoupled partition (its owners beside it) is analyzed "
                                 f"in the 1d layout without --map")
        from partplan.plan.partitions import parts_known
        if b > lay.row_blocks or (parts_known(P) and b != lay.row_blocks):   # as `partplan plan` reads it
            raise PartitionError(f"{args.partition}: {b} row blocks{' (its own count)' if parts_known(P) else ''}, "
                                 f"but layout {lay.spec} on {lay.ranks} ranks has {lay.row_blocks}; leave -k and "
                                 f"--layout out to analyze it as it was made")
        name = Path(args.partition).name
    else:
        if k is None:
            raise PartitionError(f"--method {args.method} needs -k K (number of ranks)")
        spec = spec or "1d"
        lay = layout_of(spec, k)
        opts = {"seed": 0 if args.seed is None else args.seed,
                "imbalance": DEFAULT_IMBALANCE if args.imbalance is None else args.imbalance,
                "preset": "DEFAULT" if args.preset is None else args.preset}
        from partplan.bench.methods import get_method
        opts = {o: v for o, v in opts.items() if o in get_method(args.method).takes}
        from partplan.partition.heartbeat import StderrProgress, _heartbeat
        # a heartbeat on stderr when the method takes seconds (none for a quick one, none under -q)
        with _heartbeat(StderrProgress(quiet=getattr(args, "quiet", False)), args.method):
            part = make_partition(graph, args.method, lay.row_blocks, **opts)
        source = {"method": args.method, **opts}
        name = args.method
        owner = None
    part, b = as_partition(part, graph.n, lay.row_blocks, source=name)
    k = lay.ranks
    topts.check_ranks(k)
    if args.save_partition:
        check_part_k_name(args.save_partition, lay.row_blocks)   # K: the parts in the file; before any output
    part = topts.place(graph, part)  # --map: parts placed on the topology's ranks
    timing["partition_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if owner is not None:   # what the plan of this partition sends: H[j] from owner[j]; backward conformal
        from partplan.metrics.stats import analyze_owned
        stats = analyze_owned(graph, part, owner, b, f=args.f, dtype=args.dtype, alpha=alpha, beta=beta,
                              name=f"{graph.name} / {name}", backward=not graph.is_symmetric())
        source["ownership"] = "decoupled"
    else:
        stats = analyze(graph, part, b, f=args.f, dtype=args.dtype, alpha=alpha, beta=beta,
                        name=f"{graph.name} / {name}")
    lstats = None
    layout = lay.name
    if lay.layout_stats:
        lstats = lay.volumes(graph, part, f=args.f, dtype=args.dtype, alpha=alpha, beta=beta)
    topo_out = topts.metrics(graph, part, lay, args.f, args.dtype, owner=owner)
    timing["analyze_s"] = time.perf_counter() - t0

    written = []
    if args.plot:
        from partplan.plot import plot_volume

        t0 = time.perf_counter()
        target = lstats if lstats is not None else stats
        title = None
        if lstats is not None:
            title = f"{stats.name} — {layout.upper()} layout {'x'.join(map(str, lstats.shape))}, p={lstats.p} ranks"
        written.append(str(plot_volume(target, args.plot, title=title)))
        timing["plot_s"] = time.perf_counter() - t0
    if args.save_partition:
        if owner is None and not lay.params:    # a plain 1D partition: the part ids alone
            written.append(str(write_partition(part, args.save_partition)))
        else:   # its layout and owners kept with it (a sidecar / the Parquet metadata): it analyzes the same
            from partplan.partition.api import Partition, save_partition
            P = Partition(part=part, k=lay.ranks, layout=lay.spec, layout_params=dict(lay.params), model="external",
                          backend="external", objective="total", params={}, timings={}, stats=None, owner=owner,
                          graph_fingerprint=graph.fingerprint, info={"source": source})
            written.append(str(save_partition(P, args.save_partition)))

    graph_info = {"name": graph.name, "n": graph.n, "nnz": graph.nnz, "symmetric": graph.is_symmetric(),
                  "fingerprint": graph.fingerprint}
    if args.json:
        out = stats.to_dict()
        out.update(graph=graph_info, partition={"k": k, "ranks": k, "row_blocks": b, **source},
                   layout={"layout": layout, "spec": lay.spec, **lay.params,
                           **(lstats.to_dict() if lstats is not None else {})},
                   timing=timing, written=written)
        if topo_out is not None:
            out["topology"] = topo_out
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(f"graph      {printable(graph.name)}: n={graph.n:,} nnz={graph.nnz:,} "
              f"({'symmetric' if graph_info['symmetric'] else 'not symmetric'})")
        if "file" in source:
            how = f"file {source['file']}"
        else:
            how = f"--method {source['method']}" + "".join(f" {a}={b}" for a, b in source.items() if a != "method")
        print(f"partition  k={k} ranks, {b} row blocks ({lay.spec}) from {how}")
        print()
        if lstats is not None:   # the 1D figures are those of the row blocks; the layout's per-rank ones follow
            print(f"1D exchange between the {b} row block{'' if b == 1 else 's'} (k below: row blocks; the "
                  f"{lay.spec} layout's own figures, forward, are the second table)")
        print(stats.table())
        if lstats is not None:
            print()
            print(f"{layout} layout {'x'.join(map(str, lstats.shape))} on p={lstats.p} ranks")
            print(_layout_table(lstats.summary()))
        print()
        if topo_out is not None:
            print()
            print_topology(topo_out)
        print("timing     " + ", ".join(f"{a} {b:.3f}" for a, b in timing.items()))
    for w_ in written:
        print(f"wrote {w_}", file=sys.stderr)
    return 0
