"""``partplan plan GRAPH --partition FILE [--layout L] [-k RANKS] -o OUT.plan``:
the communication plan (exchange program) of an existing partition.

The partition file can be anything the readers know: METIS ``.part.K``,
``.npy``, Parquet/Arrow/CSV (``--column``), a DGL partition folder or config,
a PyG ``node_map.pt``, a CAGNET ``.part-sizes`` file, or a partition saved by
``partplan partition`` (its layout and ranks are used). It holds one row block
per vertex; ``-k`` is the number of ranks (default: the file's row blocks
times the layout's replication).

With ``--nprocs N`` on a chunked graph directory, N processes build the plan
(any layout: 1d, 1.5d:c, 2d:RxC, routed) together (the ``plan-build`` job, :mod:`partplan.jobs.build`); started
by torchrun on a chunked graph, the same command is one of those processes.

Examples::

    partplan plan graph.mtx --partition graph.part.16 -o g16.plan
    partplan plan email-Enron --partition p.npy --layout 1.5d:2 -o e.plan --json
    partplan plan rmat22.chunked --partition part.npy -k 64 -o r.plan --nprocs 2
    torchrun --nproc-per-node 4 -m partplan plan rmat22.chunked --partition part.npy -k 4 -o r.plan
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from partplan.cli._common import (
    add_weight_option,
    check_feature_width,
    load_graph,
    positive_int,
)
from partplan.jobs.args import timeout_seconds


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "plan", help="write the communication plan of an existing partition",
        description="Build and write the exchange program (plan v2) of SpMM Z = A @ H for a partition file "
                    "(METIS, .npy, Parquet, DGL, PyG, CAGNET, or partplan's own).",
        epilog="examples:\n  partplan plan graph.mtx --partition graph.part.16 -o g16.plan\n"
               "  partplan plan email-Enron --partition p.npy --layout 2d:2x2 -o e.plan --json\n"
               "  partplan plan email-Enron --partition p64.npy --topology tree:4x16 --route domain --map greedy "
               "-o e.plan",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", metavar="GRAPH", help="graph file or registered dataset name")
    p.add_argument("--partition", required=True, metavar="FILE", help="partition file (kind detected)")
    p.add_argument("--column", metavar="NAME", help="column of a Parquet/Arrow/CSV partition file")
    p.add_argument("--layout", default=None, metavar="L",
                   help="1d (default), 1.5d:C, 2d:RxC or routed:domain:D / routed:source:D; default: the layout "
                        "saved with the partition, else 1d")
    p.add_argument("-k", "--k", type=positive_int, metavar="RANKS",
                   help="number of ranks (default: from the layout and the partition's parts: ranks = parts for "
                        "1d / 2d / routed, parts x c for 1.5d:c); checked against them when given")
    p.add_argument("-o", "--output", required=True, metavar="OUT.plan", help="plan directory to write")
    p.add_argument("-f", "--features", type=positive_int, default=128, metavar="F",
                   help="feature width the plan is costed for (default 128)")
    p.add_argument("--dtype", choices=("float32", "float64", "float16", "bfloat16"), default="float32",
                   help="element type the plan is costed for (default float32)")
    p.add_argument("--backward", choices=("auto", "separate", "none"), default="auto",
                   help="backward A^T program: auto (separate when A != A^T), separate, none")
    p.add_argument("--symmetrize", action="store_true", help="symmetrize the graph: the pattern union of A and A^T (the larger weight where both hold one)")
    add_weight_option(p)
    p.add_argument("--normalize", choices=("none", "gcn", "mean"), default="none",
                   help="plan values: gcn = D^-1/2 (A+I) D^-1/2 (PyG GCNConv), mean = D^-1 (A+I); "
                        "needed by `partplan train gcn` (default none: A as read)")
    p.add_argument("--nprocs", type=positive_int, metavar="N",
                   help="build with N processes (gloo), each reading only its chunks: needs a chunked GRAPH "
                        "directory (`partplan convert G DIR --chunks C`), any layout (1d, 1.5d:c, 2d:RxC, routed:ROUTE:D), and N <= "
                        "row blocks (each process builds the ranks of a run of whole row blocks; ~380 MiB of "
                        "torch+gloo per process); the plan is byte-identical to the one-process build")
    p.add_argument("--timeout", type=timeout_seconds, default=None, metavar="S",
                   help="with --nprocs: seconds a process waits on a peer before the build ends in one error "
                        "(default 120; 0 = the default)")
    p.add_argument("--json", action="store_true", help="print the manifest summary as JSON")
    from ._topology import add_topology_args
    add_topology_args(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from partplan.errors import PlanError
    from partplan.layouts import check_spec
    from partplan.plan import build_plan, write_plan

    check_feature_width(args.features)   # the range every plan reader accepts, before any work
    out = Path(args.output)
    if out.suffix != ".plan":
        raise PlanError(f"{out}: the output of `partplan plan` must be a NAME.plan directory")
    if out.exists() and not (out / "manifest.json").is_file() and (out.is_file() or any(out.iterdir())):
        raise PlanError(f"{out}: exists and is not a plan directory; refusing to overwrite it")
    if not out.parent.exists():
        raise PlanError(f"{out}: directory {out.parent} does not exist")
    from partplan.io.outpath import check_output_dir
    # writable, before the graph is read; not inside the graph it reads (a plan may replace the plan
    # its partition comes from: the writer is atomic)
    check_output_dir(out, kind="plan", inputs=[args.graph])
    if args.layout is not None:
        check_spec(args.layout)
    from ._topology import TopologyOptions
    topts = TopologyOptions(args, layout=args.layout)  # checked before the graph is read
    topts.check_ranks(args.k)
    if args.nprocs is not None or _under_torchrun_chunked(args.graph):
        return _run_distributed(args, out)
    if args.timeout is not None:
        from partplan.errors import OptionError
        raise OptionError("--timeout is how long a process of the distributed build (--nprocs N, or torchrun) "
                          "waits on a peer; this build runs in one process")
    graph = load_graph(args.graph, symmetrize=args.symmetrize, weight=args.weight, normalize=args.normalize)
    src = _read(args, graph)
    src, args.layout, args.k = topts.prepare(graph, src, args.k, args.layout)  # --map, the route's layout, ranks
    backward = {"auto": None, "separate": True, "none": False}[args.backward]
    from partplan.plan.store import Progress
    beat = None if getattr(args, "quiet", False) else Progress()
    plan = build_plan(graph, src, args.k, layout=args.layout, f=args.features, dtype=args.dtype, progress=beat,
                      backward=backward, meta={"partition_file": str(args.partition),
                                               **({"symmetrized": True} if args.symmetrize else {})},
                      normalize=None if args.normalize == "none" else args.normalize)
    topts.attach(plan)  # the manifest's topology object
    from ._common import plan_has_shares
    had_shares = plan_has_shares(out)
    path = write_plan(plan, out, progress=beat)
    if had_shares:   # they belonged to the plan replaced: a new plan's ranks hold other rows
        print(f"partplan: warning: {out} held shares of the plan it replaced; they are not kept (write them for "
              f"this plan with `partplan shares {out} ...`)", file=sys.stderr)
    m = plan.manifest
    summary = {**_summary(path, m), "build_s": plan.timings.get("build_s")}
    if m.get("topology"):
        summary["topology"] = {a: b for a, b in m["topology"].items() if a != "description"}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        from partplan.plan.figures import volume_line
        print(f"wrote {path}: layout {m['layout']} on {m['ranks']} ranks ({m['row_blocks']} row blocks), "
              f"backward {m['backward']}", file=sys.stderr)
        print(volume_line({"layout": m["layout"], **m["stats"]}))
    return 0


def _under_torchrun_chunked(graph: str) -> bool:
    """Started by torchrun on a chunked graph: this process is one of the
    distributed build's (``torchrun --nproc-per-node N -m partplan plan DIR ...``)."""
    from partplan.runtime.launch import under_torchrun
    if not under_torchrun():
        return False
    from partplan.io.chunked import is_chunked
    return is_chunked(graph)


def _run_distributed(args, out: Path) -> int:
    """``--nprocs N`` (or torchrun's processes): the ``plan-build`` job
    (:func:`partplan.jobs.build.build_distributed`) on a chunked graph (1D
    layout; the plan is byte-identical to the one-process build)."""
    from partplan.errors import PlanError
    from partplan.io.chunked import is_chunked
    from partplan.layouts import layout_class
    unsupported = [flag for flag, on in (("--symmetrize", args.symmetrize), ("--weight", args.weight is not None),
                                         ("--topology", getattr(args, "topology", None)))
                   if on]
    if not is_chunked(args.graph):
        raise PlanError(f"{args.graph}: --nprocs needs a chunked graph directory (write one with "
                        f"`partplan convert GRAPH DIR --chunks C`)")
    if unsupported:
        raise PlanError(f"--nprocs builds the plan of the chunked graph as stored; {', '.join(unsupported)} "
                        f"is not offered with it")
    from partplan.plan.distbuild import refuse_plan_partition
    refuse_plan_partition(args.partition)    # before the DGL / PyG detection of a partition folder
    if args.layout is not None and not layout_class(args.layout).distributed_build:
        raise PlanError(f"--nprocs does not build layout {args.layout}; build it without --nprocs")
    from partplan.io.chunked import chunk_info
    from partplan.jobs.build import build_distributed
    from partplan.plan.distbuild import partition_ranks
    from partplan.plan.builder import plan_layout
    from partplan.plan.partitions import saved_partition_meta
    # ranks from the layout and the partition's parts (a saved partition's row blocks and layout, else
    # max(part) + 1 on 1d), -k checked against them: as the one-process build does (plan_layout)
    n = chunk_info(args.graph).n
    source = args.partition
    if args.column is not None:   # a table's named column: read here, as the one-process build reads it
        from partplan.plan.partitions import read_table_column
        source = read_table_column(args.partition, n, args.column)
    # its sha256 is checked once, by build_distributed (hashing a partition of 10^9 rows takes seconds)
    saved = saved_partition_meta(args.partition, verify=False) if args.column is None else None
    if saved is not None and "n" in saved and saved["n"] != n:   # as the one-process build (load_partition)
        raise PlanError(f"{args.partition}: its metadata says n = {saved['n']} rows, but the chunked graph "
                        f"{args.graph} has {n} (a partition of another graph)")
    if saved is not None:
        from partplan.partition.api import _layout_of
        own = _layout_of(saved, args.partition)
        layout, parts = args.layout or own.spec, own.row_blocks
    from partplan.plan.partitions import declared_k
    # exact parts: a saved partition's row blocks, a declared K (NAME.part.K, a foreign partition's own):
    # as the one-process build (_read)
    declared = None if saved is not None else declared_k(args.partition, args.column)
    if saved is None:
        layout = args.layout or "1d"
        parts = declared if declared is not None else partition_ranks(source, n)
    exact = saved is not None or declared is not None
    lay = plan_layout(layout, args.k, parts, exact=exact, source=str(args.partition))
    if not layout_class(lay.spec).distributed_build:
        raise PlanError(f"--nprocs does not build layout {lay.spec}; build it without --nprocs")
    k, b = lay.ranks, lay.row_blocks
    if args.nprocs is not None and args.nprocs > b:
        raise PlanError(f"--nprocs {args.nprocs} exceeds the plan's row blocks ({b} for layout {lay.spec} on "
                        f"{k} ranks{' from -k' if args.k is not None else ''}): use --nprocs <= {b} "
                        f"(each process builds the ranks of one or more whole row blocks)")
    backward = {"auto": None, "separate": True, "none": False}[args.backward]
    from partplan.jobs.build import DEFAULT_TIMEOUT_S
    timeout = args.timeout or DEFAULT_TIMEOUT_S
    t0 = time.perf_counter()
    res = build_distributed(args.graph, source, k, out, nprocs=args.nprocs, layout=lay.spec, f=args.features,
                            dtype=args.dtype, meta={"partition_file": str(args.partition)}, backward=backward,
                            timeout_s=timeout, normalize=None if args.normalize == "none" else args.normalize)
    if res is None:  # not process 0 under torchrun
        return 0
    from partplan.plan import read_manifest
    m = read_manifest(out)
    if args.json:    # the one-process build's summary (build_s: the launch and the processes' wall), and theirs
        print(json.dumps({**res, **_summary(out, m), "build_s": time.perf_counter() - t0}, indent=1, default=str))
    else:
        print(f"wrote {out}: layout {lay.spec} on {k} ranks, built by {res['processes']} processes", file=sys.stderr)
        from partplan.plan.figures import volume_line
        print(volume_line({"layout": m["layout"], **m["stats"]}))
    return 0


def _summary(path, m: dict) -> dict:
    """What `plan --json` prints of the plan written at ``path`` (manifest ``m``), either build."""
    return {"plan": str(path), "layout": m["layout"], "ranks": m["ranks"], "row_blocks": m["row_blocks"],
            "backward": m["backward"], "groups": len(m["groups"]),
            "steps": {k: len(v.get("steps", [])) for k, v in m["programs"].items()}, "stats": m["stats"]}


def _read(args, graph):
    """The partition through the one partition reader
    (:func:`partplan.plan.partitions.read_partition_file`): a Partition where its parts are known
    exactly (a saved partplan partition, a plan directory, a METIS ``NAME.part.K`` file, a PyG / DGL /
    CAGNET partition's own part count: layout, ranks and K kept), else the bare part array (parts:
    max(id) + 1 at least, so ``-k`` may ask for more row blocks)."""
    from partplan.plan.partitions import parts_known, read_partition_file
    P = read_partition_file(args.partition, graph, column=args.column, count_named=args.k is not None)
    return P if parts_known(P) else P.part
