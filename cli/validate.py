"""``partplan validate PLAN [--graph GRAPH] [--json]``: check a communication plan.

Thin layer over :func:`partplan.plan.validate_plan`: checksums and version
(a corrupted, truncated or missing shard, an unknown version or another
graph is a one-line error, exit 2), counts transpose-consistent, indices in
range, every halo row filled once and used, the shards reassemble the planned
matrix, and a one-process numpy replay equals scipy's ``A @ H`` (exit 1 when a
check fails, 0 when all pass).

Examples::

    partplan validate enron16.plan
    partplan validate enron16.plan --graph email-Enron --json
"""
from __future__ import annotations

import json

from partplan.cli._common import add_weight_option, positive_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "validate", help="check a communication plan (checksums, counts, halo, replay vs scipy)",
        description="Validate a plan directory: checksums and format version, send/recv counts, index "
                    "ranges, halo coverage, the reassembled matrix, and a numpy replay of A @ H against scipy.",
        epilog="examples:\n  partplan validate g16.plan\n  partplan validate g16.plan --graph g.mtx --json",
        formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("plan", metavar="PLAN", help="plan directory (written by partplan partition -o X.plan)")
    p.add_argument("--graph", metavar="GRAPH", help="graph file or dataset name: also check the plan was "
                                                     "built for it and replay against its matrix")
    add_weight_option(p)
    p.add_argument("--symmetrize", action="store_true",
                   help="with --graph: symmetrize it (pattern union of A and A^T), as `partition --symmetrize` "
                        "built the plan")
    p.add_argument("-f", "--features", type=positive_int, default=4, metavar="F",
                   help="columns of the random H replayed (default 4; n × F float64 values, three copies, "
                        "within the memory budget PARTPLAN_MAX_BYTES)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random H, any integer as partplan run takes "
                                                       "it (default 0)")
    p.add_argument("--no-replay", action="store_true", help="skip the replay (structure and checksums only)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from partplan.runtime.validate import precheck, validate_plan
    # the manifest, its topology object and the replay's memory, before the graph or a shard is read
    if not args.graph and (args.weight is not None or args.symmetrize):
        from partplan.errors import OptionError
        raise OptionError(f"{'--weight' if args.weight is not None else '--symmetrize'} applies to the graph "
                          f"given with --graph")
    if args.no_replay and (args.features != 4 or args.seed != 0):   # they shape the replay's H
        from partplan.errors import OptionError
        given = " and ".join(f for f, on in (("--features", args.features != 4), ("--seed", args.seed != 0)) if on)
        raise OptionError(f"{given} shape{'s' if ' and ' not in given else ''} the replay's random H; --no-replay "
                          f"skips the replay")
    precheck(args.plan, f=args.features, replay_check=not args.no_replay, option="--features")
    graph = None
    if args.graph:
        from partplan.cli._common import load_graph
        from partplan.plan.store import read_manifest
        norm = read_manifest(args.plan).get("normalize")   # a .pt Data is read as plan_from_pyg read it
        graph = load_graph(args.graph, weight=args.weight, normalize=norm, symmetrize=args.symmetrize)
    rep = validate_plan(args.plan, graph, seed=args.seed, f=args.features, replay_check=not args.no_replay)
    _check_shares(args.plan, rep)
    if args.json:
        print(json.dumps(rep, indent=1))  # ensure_ascii: control characters are \u escapes
    else:
        from partplan.io.trust import printable
        out = _escaped(printable)  # every line of the report, escaped (strings come from the plan's files)
        out(f"plan {rep['plan']}: layout {rep['layout']}, {rep['ranks']} ranks, n={rep['n']}, nnz={rep['nnz']}"
              + (" (graph checked)" if rep["graph_checked"] else ""))
        for c in rep["checks"]:
            out(f"  {'ok  ' if c['ok'] else 'FAIL'}  {c['name']:<10} {c['detail']}")
        out("valid" if rep["ok"] else "INVALID")
    return 0 if rep["ok"] else 1


def _escaped(printable):
    import builtins

    def _p(line: str = "") -> None:
        builtins.print(printable(line))
    return _p


def _check_shares(path, rep: dict) -> None:
    """The plan's per-rank data shares, when it has them (partplan.nn.shares.validate_shares): each reads
    and checks, the edge ids cover the graph's edges once, and every edge is a nonzero of the matrix the
    shards multiply."""
    from partplan.plan.store import read_manifest
    if not rep["ok"] or not isinstance(read_manifest(path).get("shares"), dict):
        return
    from partplan.nn.shares import validate_shares
    from partplan.plan.store import load_plan
    from partplan.runtime.validate import _rebuild
    problems = validate_shares(path, _rebuild(load_plan(path))[0])
    rep["checks"].append({"name": "shares", "ok": not problems,
                          "detail": "; ".join(problems[:5]) if problems else
                          "every rank's share reads, its edges are the matrix's nonzeros, edge ids once each"})
    rep["ok"] = rep["ok"] and not problems
