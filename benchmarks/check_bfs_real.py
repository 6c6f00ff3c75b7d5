"""Correctness sweep on the fetched real graphs: BFS on
LocalComm, 4 ranks, METIS partition, layouts 1d / 2d:2x2 / routed:domain:2,
three directions, three roots each. Levels must equal scipy's unweighted
shortest paths and every tree must pass the five Graph500 checks.

    python benchmarks/check_bfs_real.py
"""

import numpy as np
import scipy.sparse.csgraph as cg

from partplan import datasets
from partplan.errors import PartplanError
from partplan.partition import metis
from partplan.plan import build_plan
from partplan.runtime.bfs import bfs_local
from partplan.runtime.graph500 import validate_bfs_tree
from partplan.bench.script import add_json_option, check_json_output, run, write_json

GRAPHS = ("email-Enron", "as-22july06", "astro-ph", "cond-mat-2003", "polblogs", "copter2")
LAYOUTS = ("1d", "2d:2x2", "routed:domain:2")
DIRECTIONS = ("top-down", "bottom-up", "auto")


def check_graph(g, ranks: int = 4, roots: int = 3) -> dict:
    """{layout: every search correct and valid} for one graph."""
    A = g.to_scipy()
    coo = A.tocoo()
    part = metis(g.normalize(symmetrize=True), ranks)
    keys = np.random.default_rng(0).choice(np.flatnonzero(np.diff(A.indptr) > 0), roots, replace=False)
    out = {}
    for spec in LAYOUTS:
        plan = build_plan(g, part, ranks, layout=spec)
        ok = True
        for root in map(int, keys):
            ref = cg.shortest_path(A, unweighted=True, indices=root)
            ref = np.where(np.isinf(ref), -1, ref).astype(np.int64)
            for direction in DIRECTIONS:
                r = bfs_local(plan, root, direction=direction)
                v = validate_bfs_tree(coo.row, coo.col, root, r.parents, n=g.n, directed=not g.is_symmetric())
                ok &= bool(np.array_equal(r.levels, ref)) and v.ok
        out[spec] = ok
    return out


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS), help=f"datasets ({' '.join(GRAPHS)})")
    add_json_option(ap)
    a = ap.parse_args(argv)
    check_json_output(a.json)
    bad, rows = 0, []
    for name in a.graphs:
        try:
            g = datasets.load_graph(name, fetch=True)
        except PartplanError as exc:
            print(f"{name}: skipped ({exc})")
            rows.append({"graph": name, "skipped": str(exc)})
            continue
        for spec, ok in check_graph(g).items():
            bad += not ok
            print(f"{name:14s} n={g.n:7d} {spec:16s} {'ok' if ok else 'WRONG'}", flush=True)
            rows.append({"graph": name, "n": g.n, "layout": spec, "ok": bool(ok)})
    write_json(a.json, {"rows": rows, "wrong": bad}, argv)
    return 1 if bad else 0


if __name__ == "__main__":
    run(main)
