"""``partplan topology show T`` and ``partplan topology probe``: look at a topology, or measure one.

Examples::

    partplan topology show tree:4x16
    partplan topology show dgx1 --json
    partplan topology probe --nprocs 4 -o machine.json
    torchrun --nproc-per-node 8 -m partplan topology probe -o gpus.json --backend nccl
"""
from __future__ import annotations

import argparse
import json
import sys

from partplan.jobs.args import MAX_REPEATS, int_range, positive_int, timeout_seconds
from partplan.cli._common import require_subcommand


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "topology", help="show a machine topology, or measure one (probe)",
        description="Topologies describe which ranks share a domain (node, rack) and what a message between "
                    "two ranks costs (α seconds, β seconds/byte, abstract cost); analyze / partition / plan take "
                    "them with --topology. See docs/guide/topology.md.",
        epilog="examples:\n  partplan topology show tree:4x16\n  partplan topology show dgx1 --json\n"
               "  partplan topology probe --nprocs 4 -o machine.json\n"
               "  partplan analyze g.mtx --method metis -k 4 --topology machine.json   # -k: the probe's processes",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="topology_command", metavar="SUBCOMMAND")
    s = sub.add_parser("show", help="print a topology (preset or JSON file)",
                       description="Print a topology's levels, link parameters and (small) cost matrix.",
                       epilog="examples:\n  partplan topology show tree:4x8x2\n  partplan topology show dgx1 --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("topology", metavar="T", help="tree:RxD[:INTRA,INTER], tree:AxBxC, dgx1, or a JSON file")
    s.add_argument("--json", action="store_true", help="print the JSON form (what a topology file holds)")
    s.add_argument("-o", "--output", metavar="FILE", help="also write the JSON form to FILE (a new file, or "
                   "a topology JSON it replaces)")
    s.set_defaults(func=run_show)
    q = sub.add_parser("probe", help="measure pairwise latency / bandwidth and write a matrix topology",
                       description="Ping-pong between every pair of ranks with torch.distributed (a small and a "
                                   "large message), then write α, β and cost matrices as a matrix topology.",
                       epilog="examples:\n  partplan topology probe --nprocs 4 -o machine.json\n"
                              "  torchrun --nproc-per-node 8 -m partplan topology probe -o gpus.json --backend nccl",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("--nprocs", type=positive_int, metavar="N", help="processes to start here (omit under torchrun)")
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="topology JSON to write (a new "
                   "file, or a topology JSON it replaces)")
    q.add_argument("--backend", choices=("gloo", "nccl"), default="gloo", help="default gloo")
    q.add_argument("--large", type=int, default=1 << 22, metavar="BYTES", help="bandwidth message (default 4 MiB; rounded down to whole float32 values, a multiple of 4: the file records the size sent)")
    q.add_argument("--repeat", type=int_range(1, MAX_REPEATS), default=5,
                   help=f"round trips per pair and size (default 5, at most {MAX_REPEATS:,})")
    q.add_argument("--timeout", type=timeout_seconds, default=60.0, help="seconds a rank waits for a peer (default 60)")
    q.add_argument("--json", action="store_true", help="print the report as JSON")
    q.set_defaults(func=run_probe)
    require_subcommand(p, sub, "a subcommand")


def run_show(args) -> int:
    from partplan.io.outpath import check_output_file
    from partplan.topology import load_topology, write_topology
    if args.output is not None:   # an unwritable -o ends the command before the topology is built
        check_output_file(args.output, kind="any")
    t = load_topology(args.topology)
    if args.output is not None:
        _refuse_another_kind(args.output)
        write_topology(t, args.output)
    if args.json:
        print(json.dumps(t.describe(), indent=1))
    else:
        print(t.table())
    return 0


def run_probe(args) -> int:
    from partplan.io.outpath import check_output_file
    from partplan.runtime.probe import run_probe as probe
    check_output_file(args.output, kind="any")   # an unwritable -o ends the probe before any process starts
    _refuse_another_kind(args.output)
    rep = probe(args.output, nprocs=args.nprocs, backend=args.backend, large=args.large, repeat=args.repeat,
                timeout=args.timeout)
    if rep is None:  # not rank 0 under torchrun
        return 0
    if rep.get("beta_floored_pairs"):
        from partplan.runtime.probe import BETA_FLOOR
        print(f"partplan: warning: {rep['beta_floored_pairs']} ordered rank pairs sent the large message no slower "
              f"than the small one (noise, or --large {args.large} too close to the small size): their β was set "
              f"to {BETA_FLOOR:g} s/byte and their costs are not measured; probe again with a larger --large or "
              f"--repeat", file=sys.stderr)
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        a, bw = rep["alpha_s"], rep["bandwidth_bytes_per_s"]
        band = (f"bandwidth {bw['min'] / 1e9:.2f}-{bw['max'] / 1e9:.2f} GB/s" if bw["min"] is not None else
                "bandwidth not measured (one rank: no pair)" if rep["ranks"] < 2 else
                "bandwidth not measured (no pair's large message was slower than its small one)")
        print(f"wrote {rep['output']}: {rep['ranks']} ranks, latency {a['min'] * 1e6:.1f}-{a['max'] * 1e6:.1f} us, "
              f"{band}")
    return 0


def _refuse_another_kind(path) -> None:
    """A topology's ``-o`` (checked writable) is new or a topology JSON already (any name): an existing
    file of another kind — a graph, a plan's manifest — is refused, never replaced."""
    from pathlib import Path

    from partplan.errors import OutputPathError
    if Path(path).exists():
        from partplan.topology import load_topology
        try:
            load_topology(str(path))
        except Exception:   # noqa: BLE001 - any reason it is no topology: it is another file
            raise OutputPathError(f"{path}: exists and is not a topology JSON; refusing to overwrite it "
                                  f"(name a new file)") from None
