"""``partplan inspect PLAN [--json] [--rank R]``: print a plan's manifest and a per-rank summary.

Reads only the manifest (per-rank figures are recorded there at write time);
``--rank R`` also opens that rank's shard (memory-mapped) and lists its fields.

Examples::

    partplan inspect enron16.plan
    partplan inspect enron16.plan --json
    partplan inspect enron16.plan --rank 3
"""
from __future__ import annotations

import json

# the partition's parameters the text names beside its provenance (all of them are in --json's params):
# the distributed partitioner's engine and process count, the balance ε, the engine's preset
_MADE_KEYS = ("engine", "nprocs", "imbalance", "preset")


def register(subparsers) -> None:
    import argparse
    p = subparsers.add_parser(
        "inspect", help="print a plan's manifest and per-rank summary",
        description="Print the manifest of a plan directory (format, graph, layout, partitioner, costed "
                    "feature width, CommStats summary) and one line per rank.",
        epilog="examples:\n  partplan inspect g16.plan\n  partplan inspect g16.plan --rank 0 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plan", metavar="PLAN", help="plan directory")
    p.add_argument("--rank", type=int, metavar="R", help="also open rank R's shard and list its fields")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


_SUMMARY_KEYS = ("total_volume", "max_send", "max_recv", "messages", "max_send_messages", "max_recv_messages",
                 "compute_imbalance", "total_reduce_rows", "time_estimate_s")


def run(args) -> int:
    from partplan.plan import load_plan, read_manifest
    from partplan.plan.store import check_files
    m = read_manifest(args.plan)
    check_files(args.plan, m)  # a missing or truncated shard is an error here too (checksums: validate)
    from partplan.nn.shares import check_share_files
    shares = check_share_files(args.plan, m)    # and a missing or truncated share
    shard = None
    if args.rank is not None:
        rp = load_plan(args.plan, rank=args.rank)
        shard = {"rank": rp.rank, "meta": rp.meta,
                 "fields": {k: {"dtype": str(v.dtype), "length": int(v.size)} for k, v in rp.arrays.items()}}
    if args.json:
        out = dict(m)
        if shard is not None:
            out["shard"] = shard
        print(json.dumps(out, indent=1, sort_keys=True))
        return 0
    g = m["graph"]
    _print(f"plan        {args.plan}  (format {m['format']} v{m['format_version']}, "
          f"{m.get('tool', {}).get('name', '?')} {m.get('tool', {}).get('version', '?')}, created {m.get('created', '-')})")
    _print(f"graph       {g.get('name')}  n={g['n']} nnz={g['nnz']} "
          f"{_kind(g)} fingerprint {g['fingerprint'][:16]}…")
    params = " ".join(f"{a}={b}" for a, b in (m["layout_params"] or {}).items()) \
        if isinstance(m["layout_params"], dict) else str(m["layout_params"])
    _print(f"layout      {m['layout']} {params}  k={m['k']} ranks={m['ranks']} "
          f"ownership={m.get('ownership')} backward={m.get('backward')}")
    made = m.get("params") if isinstance(m.get("params"), dict) else {}
    made = "".join(f" {key}={made[key]}" for key in _MADE_KEYS if isinstance(made.get(key), (str, int, float)))
    how = " ".join(f"{key}={m[key]}" for key in ("model", "backend", "objective", "seed") if m.get(key) is not None)
    _print(f"partition   {how or 'read from a file (how it was made is not recorded)'}{made}")
    _print(f"costed for  f={m.get('f')} dtype={m.get('dtype')} ({m.get('row_bytes')} bytes/row)")
    if shares:
        sh = m["shares"]
        _print(f"shares      {shares} files (share-NNNNN.arrow), {sh.get('edges', '?')} edges, "
               f"{sum(e['bytes'] for e in sh['files']):,} bytes")
    st = m.get("stats") or {}
    _print("stats       " + "  ".join(f"{k}={_fmt(st[k])}" for k in _SUMMARY_KEYS if k in st))
    if "total_volume" in st:   # what the total and the maxima count (a 1.5D maximum can exceed the total)
        from partplan.plan.figures import volume_line
        _print("volumes     " + volume_line({**st, "layout": m.get("layout")}))
    from ._topology import print_topology
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # its strings come from the manifest too: escaped below
        print_topology(m.get("topology"))
    for line in buf.getvalue().splitlines():
        _print(line)
    cols = ["rank", "rows", "held", "halo", "nnz", "send_rows", "recv_rows", "send_msgs", "recv_msgs", "bytes"]
    extra = [c for c in ("fold_send_rows", "fold_recv_rows", "bwd_send_rows", "bwd_recv_rows")
             if m["shards"] and c in m["shards"][0]]
    cols += extra
    rows = [[str(s.get(c, "")) for c in cols] for s in m["shards"]]
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)] if rows else [len(c) for c in cols]
    _print("  ".join(c.rjust(w[i]) for i, c in enumerate(cols)))
    for r in rows:
        _print("  ".join(v.rjust(w[i]) for i, v in enumerate(r)))
    if shard is not None:
        _print(f"shard of rank {shard['rank']}: " + ", ".join(f"{k}[{v['length']}] {v['dtype']}"
                                                              for k, v in sorted(shard["fields"].items())))
    return 0


def _print(line: str = "") -> None:
    """Print a line of the text report with control characters escaped (its
    strings come from the plan's files: an ANSI escape there is shown, not obeyed)."""
    from partplan.io.trust import printable
    print(printable(line))


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _kind(g: dict) -> str:
    """How a plan's manifest describes its graph: undirected, or directed (and whether its pattern is
    symmetric all the same: one pass serves both directions)."""
    if not g.get("directed"):
        return "undirected"
    return "directed (symmetric pattern)" if g.get("symmetric") else "directed"
