"""``partplan convert IN OUT``: read a graph in one format, normalize it, write
it in another (formats chosen by extension, see ``partplan.io``).

Thin layer over :func:`partplan.io.read_graph` and
:func:`partplan.io.write_graph`. ``IN`` may also be a registered dataset name
(``partplan datasets list``). An ``.hgr`` output is the column-net hypergraph
model of the graph (:func:`partplan.models.column_net`).

Examples::

    partplan convert web.txt.gz web.mtx --symmetrize --self-loops remove
    partplan convert copter2.graph copter2.npz --json
    partplan convert edges.parquet g.graph --symmetrize --self-loops remove
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from partplan.errors import GraphFormatError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "convert", help="convert a graph file to another format (with normalization)",
        description="Read IN (format by extension: .mtx .graph .hgr .npz .parquet .arrow .feather .csv "
                    ".txt/.edges/.el/.tsv .gt, text formats also .gz), normalize, and write OUT "
                    "(.mtx .graph .npz .txt .parquet .arrow .feather .csv .gt, or .hgr = column-net "
                    "hypergraph). Prints n, nnz and the fingerprint.",
        epilog="examples:\n  partplan convert email-Enron enron.mtx\n  partplan convert g.txt g.npz --symmetrize\n"
               "  partplan convert r20.npz r20 --chunks 8   # a chunked graph directory",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="IN", help="graph file or registered dataset name")
    p.add_argument("output", metavar="OUT", help="output file; its extension picks the format")
    p.add_argument("--from", dest="in_format", default=None, metavar="FMT",
                   help="input format when the extension does not say (mtx, metis, hgr, npz, parquet, "
                        "arrow, feather, csv, edgelist, gt)")
    p.add_argument("--to", dest="out_format", default=None, metavar="FMT", help="output format (as --from)")
    p.add_argument("--symmetrize", action="store_true", help="the pattern union of A and A^T, undirected (the larger weight where both hold one)")
    p.add_argument("--self-loops", choices=("keep", "add", "remove"), default="keep",
                   help="keep, add (A + I, as GCN) or remove diagonal entries (default keep)")
    p.add_argument("--keep-duplicates", action="store_true",
                   help="keep duplicate edges instead of summing them")
    p.add_argument("--drop-isolated", action="store_true", help="remove vertices without an edge other than a self loop")
    from partplan.cli._common import add_weight_option
    add_weight_option(p)
    p.add_argument("--no-relabel", action="store_true",
                   help="edge lists / tables: use the ids as row numbers instead of relabelling them")
    p.add_argument("--chunks", type=_positive_int, metavar="C",
                   help="write OUT as a chunked graph directory of C row chunks (read chunk by chunk by "
                        "`partplan plan --nprocs`)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _positive_int(text: str) -> int:
    """``--chunks``: an integer in [1, MAX_CHUNKS], refused before the graph is read."""
    import argparse

    from partplan.cli._common import positive_int
    from partplan.io.chunked import MAX_CHUNKS
    v = positive_int(text)
    if v > MAX_CHUNKS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_CHUNKS} chunks, got {v}")
    return v


def _format_of(path) -> str | None:
    """The output format its name says, or None when the name says none (its own error later)."""
    from partplan.io import detect_format
    try:
        return detect_format(path)
    except GraphFormatError:
        return None


def _load(args):
    from partplan.io import read_graph

    opts = {}
    if args.no_relabel:
        opts["relabel"] = False
    norm = dict(symmetrize=args.symmetrize, self_loops=args.self_loops, dedupe=not args.keep_duplicates,
                drop_isolated=args.drop_isolated)
    from partplan._args import check_path
    check_path("the input path", args.input)       # Path("") would be the current directory
    path = Path(args.input)
    if not path.exists() and args.in_format is None and "/" not in args.input and "." not in path.name:
        try:
            from partplan import datasets
        except ImportError:
            datasets = None
        if datasets is not None:
            if getattr(args, "weight", None) is not None:
                from partplan.errors import OptionError
                raise OptionError(f"--weight {args.weight}: names a field of a .pt PyG Data, not of the dataset "
                                  f"{args.input}")
            g = datasets.load(args.input)
            from partplan.hypergraph import Hypergraph
            if isinstance(g, Hypergraph):   # a hypergraph dataset (ibm01, ...): written as it is, to .hgr
                fmt = args.out_format or (None if args.chunks is not None else _format_of(args.output))
                if args.chunks is not None or fmt != "hgr":
                    raise GraphFormatError(f"{args.input} is a hypergraph dataset: convert writes it as .hgr only "
                                           f"(not {'chunks' if args.chunks is not None else fmt})", args.output)
                if any((args.symmetrize, args.self_loops != "keep", args.keep_duplicates, args.drop_isolated)):
                    from partplan.errors import OptionError
                    raise OptionError(f"{args.input} is a hypergraph dataset: --symmetrize, --self-loops, "
                                      f"--keep-duplicates and --drop-isolated apply to graphs")
                return g
            if any((args.symmetrize, args.self_loops != "keep", args.keep_duplicates, args.drop_isolated)):
                g = g.normalize(**norm)
            return g
    if getattr(args, "weight", None) is not None:
        from partplan.io import detect_format
        if (args.in_format or detect_format(path)) != "pt":
            from partplan.errors import OptionError
            raise OptionError(f"--weight {args.weight}: names a field of a .pt PyG Data; {args.input} is not a "
                              f".pt graph")
        opts["weight"] = args.weight
    return read_graph(path, args.in_format, **norm, **opts)


def run(args) -> int:
    from partplan.io import detect_format, write_graph, write_hypergraph

    from partplan.io.outpath import check_output_file
    if args.chunks is not None:
        return _run_chunked(args)
    # a file written inside a chunked input folder would change the input
    folder = (args.input,) if os.path.isdir(args.input) else ()
    if args.out_format is None:
        check_output_file(args.output, kind="graph", inputs=folder)  # the suffix picks the format: before reading
    else:
        from partplan.io import WRITE_FORMATS
        if args.out_format not in WRITE_FORMATS + ("hgr",):
            raise GraphFormatError(f"--to {args.out_format}: not a format partplan writes; one of "
                                   f"{', '.join(WRITE_FORMATS + ('hgr',))}", args.output)
        check_output_file(args.output, inputs=folder)
        from partplan.io import EXTENSIONS, format_name
        name = format_name(args.output)
        named = EXTENSIONS.get(name.rsplit(".", 1)[-1].lower()) if "." in name else None
        if named is not None and named != args.out_format:   # every later reader would take the name's word
            raise GraphFormatError(f"--to {args.out_format} into a name of a {named} file; name it for the format "
                                   f"written, or leave --to out to write {named}", args.output)
    t0 = time.perf_counter()
    g = _load(args)
    t1 = time.perf_counter()
    out = Path(args.output)
    fmt = args.out_format or detect_format(out)
    nets = None
    from partplan.hypergraph import Hypergraph
    if isinstance(g, Hypergraph):   # a hypergraph dataset, written as it is (_load refused other formats)
        write_hypergraph(g, out)
        info = {"input": str(args.input), "output": str(out), "format": fmt, "n": g.n, "nets": int(g.m),
                "pins": int(g.num_pins), "read_s": round(t1 - t0, 3), "write_s": round(time.perf_counter() - t1, 3)}
        return _report(args, info, [f"{info['input']} -> {info['output']} ({fmt})",
                                    f"  hypergraph: {g.n} vertices, {info['nets']} nets, {info['pins']} pins"])
    if fmt == "hgr":
        from partplan.models import column_net
        hg = column_net(g)
        write_hypergraph(hg, out)
        nets = int(hg.m)
    else:
        if fmt == "metis" and (not g.is_symmetric() or g.has_self_loops()):
            raise GraphFormatError("METIS needs an undirected graph without self loops: add "
                                   "--symmetrize --self-loops remove", out)
        write_graph(g, out, fmt)
    t2 = time.perf_counter()
    info = {"input": str(args.input), "output": str(out), "format": fmt, "n": g.n, "nnz": g.nnz,
            "directed": g.directed, "weighted": g.data is not None, "relabelled": g.ids is not None,
            "fingerprint": g.fingerprint, "read_s": round(t1 - t0, 3), "write_s": round(t2 - t1, 3)}
    if nets is not None:
        info["nets"] = nets
    lines = [f"{info['input']} -> {info['output']} ({fmt})",
             f"  n={g.n} nnz={g.nnz} {'directed' if g.directed else 'undirected'} "
             f"{'weighted' if g.data is not None else 'pattern'}{' relabelled' if g.ids is not None else ''}",
             f"  fingerprint {g.fingerprint}"]
    if nets is not None:   # a model of the graph, not the graph: say what reads it back
        lines.append(f"  hypergraph model: {nets} column nets over {g.n} vertices (nets of one pin left out); "
                     f"partplan.io.read_hypergraph reads it back; read as a graph it is "
                     f"{'A + I (net j = column j of A plus j) with row weights, not A' if nets == g.n else 'not A'}")
    lines.append(f"  read {info['read_s']} s, write {info['write_s']} s")
    return _report(args, info, lines)


def _report(args, info: dict, lines: list[str]) -> int:
    """What convert prints: ``info`` as JSON with ``--json``, else ``lines``; returns 0."""
    print(json.dumps(info, indent=2) if args.json else "\n".join(lines))
    return 0


def _run_chunked(args) -> int:
    """``--chunks C``: the graph as a chunked directory (:func:`partplan.io.chunked.write_chunked`)."""
    from partplan.io.chunked import is_chunked, write_chunked
    from partplan.io.outpath import check_output_dir
    if args.out_format is not None:
        raise GraphFormatError("--chunks writes a chunked graph directory; --to does not apply", args.output)
    if args.keep_duplicates:
        from partplan.errors import OptionError
        raise OptionError("--keep-duplicates with --chunks: a chunked graph holds canonical CSR rows (each column "
                          "once per row); drop --keep-duplicates to sum the duplicates")
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise GraphFormatError("--chunks writes a directory, and this is a file", out)
    from ._common import check_chunk_dir_name
    check_chunk_dir_name(out, GraphFormatError)      # g.graph, g.mtx: a file's name
    # a read-only or missing folder, or one inside the input: before reading the input (the input
    # itself may be rewritten: it is read whole before the new folder replaces it)
    same = out.exists() and os.path.exists(args.input) and os.path.samefile(out, args.input)
    check_output_dir(out, replace_if=is_chunked, inputs=() if same else (args.input,))
    t0 = time.perf_counter()
    g = _load(args)
    t1 = time.perf_counter()
    path = write_chunked(g, out, chunks=args.chunks)
    info = {"input": str(args.input), "output": str(path), "format": "chunked", "chunks": args.chunks,
            "n": g.n, "nnz": g.nnz, "directed": g.directed, "weighted": g.data is not None,
            "fingerprint": g.fingerprint, "read_s": round(t1 - t0, 3),
            "write_s": round(time.perf_counter() - t1, 3)}
    return _report(args, info, [f"{info['input']} -> {info['output']} (chunked, {args.chunks} chunks)",
                                f"  n={g.n} nnz={g.nnz} fingerprint {g.fingerprint}"])
