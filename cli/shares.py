"""``partplan shares PLAN (--data D.pt | --graph G.chunked [--node-data D.npz])``: write each rank's
data share beside a 1D plan.

Thin layer over :func:`partplan.nn.shares.write_shares` (what
``plan_from_pyg(..., shares=True)`` does from Python): rank r's share holds its
rows of every node field (``x``, ``y``, masks, ...), its incoming edges in
``partplan.nn.Halo``'s indexing with their edge ids and edge fields, and its
halo rows' in-degrees; ``partplan.nn.Halo(PLAN)`` and
``partplan.nn.NeighborLoader(PLAN, ...)`` then read one share per rank. From a
chunked graph (rows = targets, edge id = CSR position) and a node data file
(read by rows) the writer holds one share and one chunk at a time. The plan
is replaced atomically: a failure leaves it as it was.

Examples::

    partplan shares g.plan --data data.pt
    partplan shares r20.plan --graph r20.chunked --node-data r20-data.npz --json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "shares", help="write each rank's share of the data (rows, edges, features) beside a 1D plan",
        description="Write one data share per rank beside a 1D plan: the rank's rows of every node field, its "
                    "incoming edges (Halo's indexing, edge ids, edge fields) and its halo rows' in-degrees, "
                    "checksummed in the manifest like the plan's shards.",
        epilog="examples:\n  partplan shares g.plan --data data.pt\n"
               "  partplan shares r20.plan --graph r20.chunked --node-data r20-data.npz",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plan", metavar="PLAN", help="a 1D plan directory of the same graph")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="D.pt", help="a PyG Data saved with torch.save (edge_index, x, y, masks, "
                                                    "edge_attr, any node or edge field)")
    src.add_argument("--graph", metavar="DIR", help="a chunked graph directory (partplan convert --chunks)")
    p.add_argument("--node-data", metavar="D.npz", help="with --graph: the node data file (x, y, masks) read by rows")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from partplan.errors import OptionError, PlanError
    from partplan.io.trust import printable
    from partplan.nn.shares import write_shares
    from partplan.plan.store import Progress, read_manifest
    if args.node_data and not args.graph:
        raise OptionError("--node-data goes with --graph (a .pt Data carries its own node fields)")
    read_manifest(args.plan)   # a plan, checked before any data is read
    progress = None if getattr(args, "quiet", False) else Progress(sys.stderr)
    if args.data:
        from partplan.io.pt import load_pt
        data = load_pt(args.data)
        if not hasattr(data, "edge_index"):
            raise OptionError(f"{printable(args.data)}: holds an edge_index tensor alone; shares need a PyG Data "
                              f"(node fields with their graph)")
        try:
            write_shares(args.plan, data, progress=progress)
        except PlanError as exc:   # what the data holds, named by its file (the plan's own name their plan)
            msg = str(exc)
            if msg.startswith((str(args.plan), str(Path(args.plan)), str(Path(args.plan).resolve()))):
                raise
            raise PlanError(f"{printable(args.data)}: {msg}") from None
    else:
        write_shares(args.plan, graph=args.graph, features=args.node_data, progress=progress)
    m = read_manifest(args.plan)
    sh = m["shares"]
    rep = {"plan": str(args.plan), "ranks": m["ranks"], "edges": sh["edges"],
           "bytes": sum(f["bytes"] for f in sh["files"]), "node_fields": sorted(sh["fields"]["node"]),
           "edge_fields": sorted(sh["fields"]["edge"])}
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print(f"wrote {rep['ranks']} shares beside {printable(rep['plan'])}: {rep['bytes']:,} bytes; node fields "
              f"{', '.join(rep['node_fields']) or 'none'}; edge fields {', '.join(rep['edge_fields']) or 'none'}")
    return 0
