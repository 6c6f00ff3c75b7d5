"""``partplan partition``: partition a graph for K ranks and write the result.

Thin layer over :func:`partplan.partition.api.partition`. OUT by name:
``.npy`` / ``.part`` / METIS-style ``g.part.K`` / ``.parquet`` → the partition
(+ ``OUT.json`` sidecar except for Parquet); ``.plan`` → the communication
plan (:func:`partplan.plan.build_plan` + :func:`partplan.plan.write_plan`),
or the partition alone with ``--partition-only``. Progress goes to stderr.

Without ``-o`` the partition goes where gpmetis puts it: ``GRAPH.part.K``
next to the graph file (``NAME.part.K`` in the current folder for a dataset
name), and stderr says so. An output named ``*.part.K`` must have the K of
the parts in the file: ``-k`` (``-k`` / C for a 1.5D layout, whose C replicas
share a row block), as every reader and ``export --to metis`` read K.

Examples::

    partplan partition email-Enron -k 16 -o enron16.npy
    partplan partition graph.mtx -k 64 --model graph --engine metis -o g.part.64
    partplan partition graph.mtx -k 16 --objective max-both --json -o g16.plan
    partplan partition graph.mtx -k 16 --layout 1.5d:4 --preset QUALITY -o g.parquet
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from partplan.errors import BackendUnavailableError, PartitionError
from partplan.io.trust import printable
from ._common import fraction as _fraction
from ._common import add_weight_option, check_feature_width, load_graph, nonneg_float
from ._common import positive_int as _positive_int
from partplan.partition.options import DEFAULT_IMBALANCE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "partition", help="partition a graph for K ranks (graph / hypergraph / stochastic model)",
        description="Partition the rows of a graph for K ranks with a real partitioner (pymetis, "
                    "Mt-KaHyPar, KaHyPar) or a baseline, optionally refine the bottleneck (max send/recv) "
                    "or decouple ownership, and write the partition or the communication plan.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  partplan partition email-Enron -k 16 -o enron16.npy\n"
               "  partplan partition g.mtx -k 64 --model graph -o g.part.64\n"
               "  partplan partition g.mtx -k 16 --objective max-both -o g16.plan\n"
               "  partplan partition g.mtx -k 16 --layout 1.5d:4 --preset QUALITY --json -o g.parquet\n"
               "  partplan partition g.mtx -k 64 --preset fast -o g.part.64\n"
               "  partplan partition g.mtx -k 16 --model stochastic --sampler neighbor:512:10,5 -o g.npy\n"
               "  partplan partition email-Enron -k 16 --topology tree:4x4 --route domain --map greedy -o e.plan")
    p.add_argument("graph", metavar="GRAPH", help="graph file (.mtx, .graph, .npz, .parquet, edge list, ...) "
                                                  "or a dataset name (partplan datasets)")
    p.add_argument("-k", "--k", type=_positive_int, required=True, metavar="K", help="number of ranks")
    p.add_argument("--model", default=None, choices=["graph", "hypergraph", "stochastic", "baseline"],
                   help="partitioning model (default: none given, the default pipeline of --preset auto; a "
                        "model runs one engine)")
    from partplan.partition.engines import BACKENDS  # the registry: one list of engines
    p.add_argument("--engine", dest="backend", default=None, choices=list(BACKENDS) + _mpi_engines(),
                   help="engine (default: metis for graph, mtkahypar for hypergraph/stochastic, random "
                        "for baseline)")
    p.add_argument("--preset", default=None,
                   help="auto (the default: METIS and KaMinPar starts, km1 V-cycles, max(send, recv) "
                        "refinement; docs/design/planner.md); fast (METIS + km1 V-cycle); a Mt-KaHyPar preset: "
                        "DEFAULT, QUALITY (the slow best-km1 path: QUALITY km1, hubs, max-both refinement), "
                        "HIGHEST_QUALITY, DETERMINISTIC, DETERMINISTIC_QUALITY, LARGE_K; with --engine "
                        "kaminpar a KaMinPar context (default, fast, eco, strong, largek*, terapart*); a "
                        "context only KaMinPar has (eco, strong, largek*, terapart*) runs KaMinPar")
    p.add_argument("--metric", default=None, choices=["km1", "cut", "soed"],
                   help="the engine's own objective (mtkahypar: km1, cut, soed; kahypar: km1, cut; "
                        "default km1 = volume)")
    p.add_argument("--objective", default=None,
                   choices=["total", "max-send", "max-recv", "max-both", "weighted"],
                   help="total volume only, or bottleneck refinement afterwards (default: max-both for the "
                        "hypergraph model with a 1d/1.5d layout, else total; without --model, --engine or "
                        "--preset, max-send / max-recv / weighted refine the default pipeline's partition)")
    p.add_argument("--layout", default="1d", help="1d, 1.5d:C (C replicas), 2d:RxC, or routed:domain:D / routed:source:D (two-level "
                        "exchange through domains of D ranks; see --topology --route) (default 1d)")
    p.add_argument("--imbalance", type=_fraction, default=DEFAULT_IMBALANCE, help="ε: compute balance tolerance "
                                                                      f"(default {DEFAULT_IMBALANCE})")
    p.add_argument("--balance", default=None, choices=["nnz", "rows", "memory"],
                   help="what ε bounds per rank: nnz = each row's nonzeros (the SpMM's compute), rows = one per "
                        "row (the rows of H a rank holds: a GNN's dense layers and activations), memory = a PyG "
                        "Data's bytes per vertex when it trains from shares (its node fields' row and its "
                        "in-edges' share, partplan.nn.shares.memory_weights; a .pt graph only) (default: the "
                        "graph file's vertex weights when it has them, else nnz)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--threads", type=_positive_int, default=None, help=_help("--threads"))
    p.add_argument("--ownership", default="conformal", choices=["conformal", "decoupled"],
                   help="decoupled: choose the owner of each H row inside its connectivity set (1D)")
    p.add_argument("--ownership-method", default=None, choices=_choices("--ownership-method"),
                   help=_help("--ownership-method"))
    p.add_argument("--handoff", default=None, choices=_choices("--handoff"), help=_help("--handoff"))
    p.add_argument("--kahypar-ini", default=None, metavar="INI", help=_help("--kahypar-ini"))
    p.add_argument("--sampler", default=None, help="stochastic model sampler: " + _help("--sampler"))
    p.add_argument("--theta", type=float, default=None, help="stochastic model " + _help("--theta"))
    p.add_argument("--delta", type=float, default=None, help="stochastic model " + _help("--delta"))
    p.add_argument("--time-limit", type=nonneg_float, default=None, help=_help("--time-limit"))
    p.add_argument("--volume-tolerance", type=nonneg_float, default=None, help=_help("--volume-tolerance"))
    p.add_argument("--allow-overload", action="store_true", default=None, help=_help("--allow-overload"))
    p.add_argument("--hub-factor", type=nonneg_float, default=None, help=_help("--hub-factor"))
    p.add_argument("--symmetrize", action="store_true", help="symmetrize the graph after reading")
    add_weight_option(p)
    p.add_argument("-f", "--features", type=_positive_int, default=_default("--features"), help=_help("--features"))
    p.add_argument("--dtype", default=_default("--dtype"), help=_help("--dtype"))
    p.add_argument("-o", "--output", metavar="OUT", default=None,
                   help="output file: .npy / .part / .part.K / .txt / .parquet / .arrow / .feather / .csv (partition; "
                        "text may end in .gz) or .plan (communication plan); "
                        "default GRAPH.part.K next to the graph (like gpmetis); with --nprocs a .npy, default "
                        "GRAPH.part.K.npy (with its GRAPH.part.K.npy.json sidecar)")
    p.add_argument("--normalize", choices=("none", "gcn", "mean"), default="none",
                   help="plan values: gcn = D^-1/2 (A+I) D^-1/2 (PyG GCNConv), mean = D^-1 (A+I); "
                        "needed by `partplan train gcn` (default none: A as read)")
    p.add_argument("--partition-only", action="store_true", help="write the partition even if OUT ends in .plan")
    p.add_argument("--shares", action="store_true",
                   help="with a PyG Data (.pt) and a .plan output: also write each rank's share of its node and "
                        "edge fields beside the plan (what partplan shares does; partplan.nn.Halo(PLAN) and "
                        "NeighborLoader read them)")
    p.add_argument("--nprocs", type=_positive_int, default=None, metavar="N",
                   help="partition with N MPI processes (mpirun; each reads only its chunks of a chunked graph): "
                        "--engine zoltan (Zoltan PHG, exact volume), stream (Fennel in process 0) or ptscotch; "
                        "without --engine chosen per graph (the stream on hub-heavy graphs whose largest hub "
                        "spans 1-3 parts, else Zoltan, else PT-Scotch), "
                        "then the distributed bottleneck refinement (a graph of at most 2^24 nonzeros + rows is "
                        "held whole: the engine's partition refined and the single-process default, the better "
                        "kept) and greedy volume passes that never raise the bottleneck (in process 0 while its "
                        "n x k pin counts fit; else, and on directed patterns, rounds over every process's rows); "
                        "writes a .npy partition")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    from ._topology import add_topology_args
    add_topology_args(p)
    p.set_defaults(func=run)


def _backend_names() -> list:
    from partplan.partition.engines import BACKENDS
    return list(BACKENDS)


def _mpi_engines() -> list:
    """The registry's engines that run on MPI processes only (the others are BACKENDS already)."""
    from partplan.partition.registry import mpi_engine_names
    from partplan.partition.engines import BACKENDS
    return [e for e in mpi_engine_names() if e not in BACKENDS]


def _run_distributed(args, progress) -> int:
    """``--nprocs N``: the partitioner on MPI processes (partplan.partition.pipeline.distributed), 1D
    partitions only; its arguments are checked by the one resolve() of partition()."""
    from partplan.partition.context import DistributedRefineContext
    from partplan.partition.pipeline.distributed import distributed_partition
    from partplan.partition.request import resolve

    plan_only = {"--topology": "topology", "--route": "route", "--route-level": "route_level", "--map": "map_method"}
    given = [flag for flag, attr in plan_only.items() if getattr(args, attr, None) not in (None, False)]
    if args.partition_only:
        given.append("--partition-only")
    if given:
        raise BackendUnavailableError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply with "
                                      f"--nprocs (the distributed "
                                      f"partitioner writes 1D partitions)")
    if args.balance not in (None, "nnz"):
        raise BackendUnavailableError(f"--balance {args.balance} does not apply with --nprocs: the distributed "
                                      f"partitioner balances row nonzeros")
    plan_values = [flag for flag, on in (("--shares", args.shares), ("--normalize", args.normalize != "none")) if on]
    if plan_values:
        raise BackendUnavailableError(f"{' and '.join(plan_values)} shape{'s' if len(plan_values) == 1 else ''} a "
                                      f"plan, and the distributed partitioner writes a partition (NAME.npy): plan "
                                      f"it with `partplan plan DIR --partition NAME.npy --nprocs N"
                                      f"{' --normalize ' + args.normalize if args.normalize != 'none' else ''}`")
    req = resolve(None, args.k, model=args.model, backend=args.backend, objective=args.objective,
                  layout=args.layout, imbalance=args.imbalance, seed=args.seed, ownership=args.ownership,
                  options=_options(args, progress), nprocs=args.nprocs)
    out = Path(args.output) if args.output else Path(f"{default_output(args.graph, args.k)}.npy")
    if out.suffix.lower() != ".npy":
        raise PartitionError(f"{out}: the distributed partitioner writes a .npy partition (each process writes "
                             f"its rows); name the output NAME.npy")
    from partplan.io.outpath import check_output_file
    check_output_file(out, kind="partition", inputs=[args.graph])   # before the (possibly long) read
    if not args.output:
        print(f"partplan: no -o given: writing the partition to {out}", file=sys.stderr, flush=True)
    from partplan.io.chunked import is_chunked
    graph = args.graph
    if args.weight is not None and is_chunked(graph):   # read by the processes as stored
        from ._common import weight_not_pt
        raise weight_not_pt(args.weight, args.graph)
    if not is_chunked(graph) or args.symmetrize:   # a file or a dataset name: read here, chunked by the launcher
        progress(f"reading {args.graph}")
        graph = load_graph(args.graph, symmetrize=args.symmetrize, weight=args.weight)
        if args.balance == "nnz":       # a file's vertex weights set aside: the processes balance row nnz
            graph = graph.with_balance("nnz")
        from partplan.partition.pipeline.distributed import refuse_vertex_weights
        refuse_vertex_weights(graph)    # before the balance floor and the processes
    ctx = DistributedRefineContext(time_limit=req.groups["refine"].get("time_limit"), seed=req.seed)
    from partplan.partition.api import balance_floor_message, compute_floor_message, graph_floors
    floor, cfloor = graph_floors(graph, req.k, req.imbalance, vertex_weights=False)   # the processes balance row nnz
    res = distributed_partition(graph, req.k, nprocs=req.nprocs, output=out, engine=req.engine,
                                imbalance=req.imbalance, seed=req.seed, context=ctx, engine_options=req.engine_opts,
                                quiet=args.quiet, progress=progress, f=req.f, dtype=req.dtype)
    if floor is not None:   # a warning, as the one-process partitioner's: said even under -q
        print(f"partplan: warning: {balance_floor_message(floor, req.k)} (this partition: "
              f"{res['compute_imbalance']:.3f})", file=sys.stderr, flush=True)
    if cfloor is not None:
        print(f"partplan: warning: {compute_floor_message(cfloor, req.k)} (this partition: "
              f"{res['compute_imbalance']:.3f})", file=sys.stderr, flush=True)
    from partplan.partition.api import distributed_over_epsilon, over_epsilon_message
    over = distributed_over_epsilon(res, req.imbalance) if floor is None and cfloor is None else None
    if over is not None:
        print(f"partplan: warning: {over_epsilon_message(over, req.k)}", file=sys.stderr, flush=True)
    relabelled = getattr(graph, "ids", None) is not None     # a file read here (a chunked graph keeps its rows)
    if relabelled:
        _say_relabelled(args.graph, out)
    if args.json:   # "stats": the one-process JSON's names for the processes' final figures
        from partplan.partition.pipeline.distributed import sidecar_stats
        print(json.dumps({**{k: v for k, v in res.items() if k not in ("send", "recv", "compute_load")},
                          "stats": sidecar_stats(res), "ids_relabelled": relabelled,
                          **({"balance_floor": floor} if floor is not None else {}),
                          **({"compute_floor": cfloor} if cfloor is not None else {}),
                          **({"over_epsilon": over} if over is not None else {})}, indent=1))
        return 0
    r, e = res["result"], res["engine_result"]
    rows = [("graph", f"{res['graph']} (n={res['n']}, nnz={res['nnz']})"),
            ("ranks / processes", f"{res['k']} / {res['nprocs']} MPI"), ("engine", res["backend"]),
            ("total_volume", f"{r['total_volume']} (engine {e['total_volume']})"),
            ("max_send", f"{r['max_send']} (engine {e['max_send']})"),
            ("max_recv", f"{r['max_recv']} (engine {e['max_recv']})"),
            *([("messages", f"{res['stats']['messages']:,} (edge cut {res['stats']['edge_cut']:,})")]
              if "messages" in res.get("stats", {}) else []),
            ("compute_imbalance", f"{res['compute_imbalance']:.4g}"),
            *([("rows per rank", f"max {iso['max_rows']:,}, mean {iso['mean_rows']:,.1f} ({iso['rows']:,} isolated "
                                 f"rows among them, placed where the fewest rows are)")]
              if isinstance(iso := res.get("isolated"), dict) else []),
            ("time (s)", ", ".join(f"{name} {max(s[name]['wall_s'] for s in res['stages']):.3g}"
                                   for name in res["stages"][0])),
            ("peak RSS / process (MiB)", ", ".join(str(max(v['peak_rss_bytes'] for v in s.values()) >> 20)
                                                    for s in res["stages"])),
            ("output", res["output"])]
    w = max(len(a) for a, _ in rows)
    print("\n".join(f"{a:<{w}}  {b}" for a, b in rows))
    return 0


def _help(flag: str) -> str:
    """A flag's help and default(s), from the option's context field (partition/context.py)."""
    from partplan.partition.context import cli_help
    return cli_help(flag).replace("%", "%%")


def _field(flag: str):
    from partplan.partition.context import cli_fields
    return cli_fields(flag)[0][1]


def _choices(flag: str) -> list:
    return list(_field(flag).metadata["choices"])


def _default(flag: str):
    return _field(flag).default


def default_output(graph: str, k: int) -> Path:
    """gpmetis's name for the partition of ``graph`` into ``k`` parts (row blocks: the part ids
    the file holds, k / c for a 1.5D layout): ``GRAPH.part.K`` beside a graph file,
    ``NAME.part.K`` in the current folder for a dataset name."""
    path = Path(graph)
    if path.exists():
        return path.with_name(f"{path.name}.part.{k}")
    return Path(f"{Path(graph).name}.part.{k}")


def _options(args, progress) -> dict:
    """The engine / model / post-pass options given on the command line, as partition() names them."""
    from partplan.partition.context import cli_options

    opts = {"f": args.features, "dtype": args.dtype, "progress": progress}
    given = {"--preset": "preset", "--metric": "metric", **cli_options()}   # flag -> option, from the contexts
    for flag, key in given.items():
        v = getattr(args, flag.lstrip("-").replace("-", "_"))
        if v is not None and key not in ("f", "dtype"):
            opts[key] = v
    return opts


def _say_relabelled(source: str, written) -> None:
    """The warning of a partition written without the file ids its graph's reader relabelled."""
    print(f"partplan: warning: the vertex ids of {printable(source)} were relabelled 0..n-1 in sorted order; "
          f"{printable(str(written))} holds one part per row in that order (row i: the i-th smallest id). A .csv "
          f"or .parquet output (of a partition in one process) adds each row's id in the file as the column "
          f"file_id", file=sys.stderr, flush=True)


def _has_id_column(path) -> bool:
    """Whether a partition output's format carries the rows' file ids (a table: the column file_id)."""
    from partplan.io.partfile import TABLE_SUFFIXES, _suffixes

    return _suffixes(Path(path)) in TABLE_SUFFIXES


def run(args) -> int:
    from partplan.partition.api import partition, save_partition

    if args.features is not None:
        check_feature_width(args.features)   # the range every plan reader accepts, before any work
    if args.output == "":
        from partplan.errors import OutputPathError
        raise OutputPathError("-o: the output path is empty")
    if args.output and args.output.endswith("/"):    # Path() below would drop the slash
        from partplan.io.outpath import check_output_file
        check_output_file(args.output, kind="partition")
    t_start = time.perf_counter()

    from partplan.partition.heartbeat import StderrProgress
    progress = StderrProgress(t_start, quiet=args.quiet)
    progress.warnings_apart = True     # printed below as `partplan: warning:` lines, once each
    if args.nprocs is not None:
        return _run_distributed(args, progress)
    if args.backend in _mpi_engines():
        raise BackendUnavailableError(f"--engine {args.backend} runs with MPI processes: add --nprocs N")

    from partplan.io.partfile import check_part_k_name
    from partplan.layouts import parse_layout
    blocks = parse_layout(args.layout, args.k).row_blocks     # the K of NAME.part.K: the parts in the file
    out = Path(args.output) if args.output else default_output(args.graph, blocks)
    check_part_k_name(out, blocks, k_is="-k is" if blocks == args.k else f"-k {args.k} --layout {args.layout} has")
    want_plan = out is not None and out.suffix.lower() == ".plan" and not args.partition_only
    if out is not None:  # where the result goes is checked before any work
        from partplan.io.outpath import check_output_file
        check_output_file(out.with_suffix(".npy") if out.suffix.lower() == ".plan" and not want_plan else out,
                          kind="partition", inputs=[args.graph])
    if want_plan:
        try:
            from partplan.plan import build_plan, write_plan
        except ImportError as exc:
            raise BackendUnavailableError(f"plans are not available yet in this install ({exc}); "
                                          f"use --partition-only or a .npy/.part/.parquet name") from None
    if args.normalize != "none" and not want_plan:
        how = ("--partition-only writes the partition alone" if args.partition_only else
               "write one with -o NAME.plan")
        raise PartitionError(f"--normalize {args.normalize} sets the values of a plan: {how} (a partition holds "
                             f"no values; `partplan plan GRAPH --partition P --normalize {args.normalize}` plans "
                             f"an existing partition)")
    if args.balance == "memory" and not str(args.graph).lower().endswith(".pt"):
        raise PartitionError("--balance memory counts a PyG Data's bytes per vertex: give a .pt graph (or --balance "
                             "rows / nnz)")
    if args.shares and not (want_plan and str(args.graph).lower().endswith(".pt")):
        raise PartitionError("--shares writes a PyG Data's shares beside a plan: give a .pt graph and -o NAME.plan")
    from partplan.layouts import layout_class
    if args.shares and not layout_class(args.layout).halo:
        raise PartitionError(f"--shares needs a 1D plan (Halo's rows and edges); --layout is {args.layout}")
    # check every option before the (possibly long) read (the layout was parsed with the output's name)
    from ._topology import TopologyOptions
    topts = TopologyOptions(args, layout=args.layout)
    topts.check_ranks(args.k)
    if args.ownership_method is not None and args.ownership != "decoupled":
        raise BackendUnavailableError("--ownership-method applies to --ownership decoupled only")
    opts = _options(args, progress)
    # the library's one validation layer (partition/request.py), before the read; partition() repeats it
    from partplan.partition.request import resolve
    resolve(None, args.k, model=args.model, backend=args.backend, objective=args.objective, layout=args.layout,
            imbalance=args.imbalance, seed=args.seed, ownership=args.ownership, options=opts)
    if not args.output:  # said once every option is checked
        print(f"partplan: no -o given: writing the partition to {out} (like gpmetis)", file=sys.stderr,
              flush=True)
    progress(f"reading {args.graph}")
    if args.balance == "memory":   # the graph and its bytes per vertex from one read of the .pt
        from partplan.nn.shares import memory_weights
        from ._common import load_pt_graph
        graph, data = load_pt_graph(Path(args.graph), symmetrize=args.symmetrize, weight=args.weight,
                                    normalize=args.normalize if want_plan else None)
        graph = graph.with_balance(memory_weights(data))
        del data
    else:
        graph = load_graph(args.graph, symmetrize=args.symmetrize, weight=args.weight,
                           normalize=args.normalize if want_plan else None)
    progress(f"{printable(graph.name)}: n={graph.n}, nnz={graph.nnz}")
    if args.balance not in (None, "memory"):
        graph = graph.with_balance(args.balance)
    p = partition(graph, args.k, model=args.model, backend=args.backend, objective=args.objective,
                  layout=args.layout, imbalance=args.imbalance, seed=args.seed, ownership=args.ownership,
                  **opts)
    if topts.active:  # --map places the parts on ranks; --route picks the routed layout
        p = topts.apply(graph, p)
    written = None
    if out is not None:
        if want_plan:
            progress("building the communication plan")
            from partplan.plan.store import Progress
            beat = None if args.quiet else Progress()
            plan = build_plan(graph, p, f=args.features, dtype=args.dtype,
                              normalize=None if args.normalize == "none" else args.normalize, progress=beat,
                              meta={"symmetrized": True} if args.symmetrize else None)
            topts.attach(plan)
            from ._common import plan_has_shares
            had_shares = plan_has_shares(out) and not args.shares
            written = write_plan(plan, out, progress=beat)
            if had_shares:   # they belonged to the plan replaced
                print(f"partplan: warning: {out} held shares of the plan it replaced; they are not kept (write "
                      f"them for this plan with `partplan shares {out} ...`, or --shares)", file=sys.stderr)
            if args.shares:
                progress("writing each rank's share")
                from partplan.io.pt import load_pt
                from partplan.nn.shares import write_shares
                write_shares(out, load_pt(args.graph), progress=beat)
        else:
            if out.suffix.lower() == ".plan":
                out = out.with_suffix(".npy")
            written = save_partition(p, out, ids=graph.ids)
            if graph.ids is not None and not _has_id_column(written):
                _say_relabelled(args.graph, written)
        progress(f"wrote {written}")
    from partplan.partition.api import balance_floor_message, compute_floor_message
    for key, message in (("balance_floor", balance_floor_message), ("compute_floor", compute_floor_message)):
        if key in p.info:   # a warning: said even under -q (stderr; stdout stays the result)
            said = message(p.info[key], p.row_blocks)
            if p.stats is not None:
                said += f" (this partition: {p.stats.summary()['compute_imbalance']:.3f})"
            print(f"partplan: warning: {said}", file=sys.stderr, flush=True)
    if "over_epsilon" in p.info:    # a warning as well: an engine's own balance, above ε
        from partplan.partition.api import over_epsilon_message
        print(f"partplan: warning: {over_epsilon_message(p.info['over_epsilon'], p.row_blocks)}", file=sys.stderr,
              flush=True)
    if "over_compute_limit" in p.info:
        from partplan.partition.api import over_compute_message
        print(f"partplan: warning: {over_compute_message(p.info['over_compute_limit'], p.row_blocks)}",
              file=sys.stderr, flush=True)
    if args.json:
        d = p.to_dict(arrays=False)
        d["output"] = None if written is None else str(written)
        d["ids_relabelled"] = graph.ids is not None      # rows 0..n-1 are the file's ids in sorted order
        if topts.active:
            d["topology"] = topts.metrics(graph, p.part, parse_layout(p.layout, p.ranks), args.features, args.dtype,
                                          owner=p.owner)
        print(json.dumps(d, indent=1))
    else:
        s = p.stats.summary() if p.stats is not None else {}
        rows = [("graph", f"{printable(graph.name)} (n={graph.n}, nnz={graph.nnz})"),
                ("ranks / row blocks", f"{p.ranks} / {p.row_blocks} ({p.layout})"),
                ("model / backend", f"{p.model} / {p.backend}"), ("objective", p.objective),
                ("ownership", p.ownership)]
        from partplan.plan.figures import volume_rows
        if "total_volume" in s:   # what each figure counts, named
            rows += volume_rows({**s, "layout": "1d"}, per="rank" if p.row_blocks == p.ranks else "row block")
        for key in ("messages", "compute_imbalance"):
            if key in s:
                rows.append((key, f"{s[key]:.4g}" if isinstance(s[key], float) else str(s[key])))
        if p.layout_stats is not None:
            rows += volume_rows(p.layout_stats.summary(), prefix=f"{p.layout} ")
        rows.append(("time (s)", ", ".join(f"{k[:-2]} {v:.3g}" for k, v in p.timings.items())))
        if written is not None:
            rows.append(("output", str(written)))
        w = max(len(a) for a, _ in rows)
        print("\n".join(f"{a:<{w}}  {b}" for a, b in rows))
    return 0


__all__ = ["register", "run", "load_graph", "PartitionError"]
