"""``partplan export PLAN --to dgl|pyg|metis OUT``: hand a plan's partition to another system.

Thin layer over :func:`partplan.interop.export_plan`. ``metis`` writes one part
id per line; ``dgl`` a DGL partition config + id mappings + the pipeline's
partition assignment (no ``.dgl`` binaries: dgl is not installed); ``pyg`` the
``torch_geometric.distributed.Partitioner`` folder (META.json, node_map.pt,
edge_map.pt, part_i/*.pt) holding the ORIGINAL graph's edges (a normalized
plan needs ``--graph GRAPH``, checked against the plan's source fingerprint; a ``.pt``
PyG Data is exported as PyG partitions it: each column of its ``edge_index`` once,
edge id = column, ``--weight FIELD`` when the plan was built weighted)
and, with ``--data D.npz``, each part's x, y and masks. See docs/guide/plans.md, "Interop".

Examples::

    partplan export enron16.plan --to metis enron.part.16
    partplan export enron16.plan --to dgl enron_dgl/
    partplan export enron16.plan --to pyg enron_pyg/
    partplan export enron16_gcn.plan --to pyg enron_pyg/ --graph enron.mtx --data enron.npz
"""
from __future__ import annotations

import json


def register(subparsers) -> None:
    import argparse
    p = subparsers.add_parser(
        "export", help="export a plan's partition to DGL, PyG or METIS layouts",
        description="Export the partition of a plan to the DGL partition layout, the PyG Partitioner layout "
                    "or a METIS .part file, so their users keep their training code.",
        epilog="examples:\n  partplan export g16.plan --to metis g.part.16\n"
               "  partplan export g16.plan --to dgl out_dgl/\n  partplan export g16.plan --to pyg out_pyg/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plan", metavar="PLAN", help="plan directory")
    p.add_argument("--to", required=True, choices=("dgl", "pyg", "metis"), help="target layout")
    p.add_argument("out", metavar="OUT", help="output file (metis) or new/empty directory (dgl, pyg)")
    p.add_argument("--graph-name", help="graph name used in the DGL config (default: the plan's graph name)")
    p.add_argument("--graph", metavar="GRAPH",
                   help="pyg: the original graph (file or dataset name) whose edges are exported; needed for a "
                        "normalized plan (checked against the plan's source fingerprint)")
    p.add_argument("--symmetrize", action="store_true", help="with --graph: symmetrize it (pattern union of A and A^T), as the plan was built")
    from partplan.cli._common import add_weight_option
    add_weight_option(p)
    p.add_argument("--data", metavar="D.npz",
                   help="pyg: node data file (x, y, train/val/test masks; see `partplan train`) stored per part")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from partplan.interop.export import export_plan
    from partplan.io.outpath import check_output_dir, check_output_file
    if args.to == "metis":
        if str(args.out).lower().endswith(".plan"):
            from partplan.io.outpath import OutputPathError
            raise OutputPathError(f"{args.out}: a .plan name is a plan directory; --to metis writes one partition "
                                  f"file (name it NAME.part.K)")
        check_output_file(args.out, kind="partition")
    else:
        check_output_dir(args.out)
    if args.to != "pyg" and (args.graph or args.data):
        from partplan.errors import OptionError
        raise OptionError(f"--graph and --data are for --to pyg only, not --to {args.to}")
    if args.weight is not None and not args.graph:
        from partplan.errors import OptionError
        raise OptionError("--weight names a field of the .pt graph given with --graph")
    if args.symmetrize and not args.graph:
        from partplan.errors import OptionError
        raise OptionError("--symmetrize applies to the graph given with --graph (--to pyg)")
    if args.graph_name is not None and (args.to != "dgl" or not args.graph_name.strip()):
        from partplan.errors import OptionError
        raise OptionError("--graph-name names the graph in DGL's partition config: --to dgl, a non-empty name"
                          if args.to == "dgl" else f"--graph-name is for --to dgl only, not --to {args.to}")
    graph, symmetrize = None, False
    if args.graph:
        gp = Path(args.graph)
        if gp.is_file() and gp.name.lower().endswith(".pt"):
            # a PyG Data: exported as PyG partitions it, every column of its edge_index once (edge id = column)
            graph, symmetrize = str(gp), args.symmetrize
        else:
            from partplan.cli._common import load_graph
            graph = load_graph(args.graph, symmetrize=args.symmetrize, weight=args.weight)
    out = export_plan(args.plan, args.to, args.out, graph_name=args.graph_name, graph=graph, data=args.data,
                      weight=args.weight if isinstance(graph, str) else None, symmetrize=symmetrize)
    files = sorted(str(p.relative_to(out)) for p in Path(out).rglob("*") if p.is_file()) if Path(out).is_dir() \
        else [Path(out).name]
    if args.json:
        print(json.dumps({"to": args.to, "out": str(out), "files": files}))
    else:
        print(f"wrote {args.to} export to {out}: {len(files)} file(s)")
    return 0
