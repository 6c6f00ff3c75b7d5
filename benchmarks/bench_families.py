"""Family benchmark of the default pipeline: METIS, plain Mt-KaHyPar (km1),
KaMinPar and the partplan presets side by side in ONE run, per graph family.

Every method runs through :func:`partplan.partition.api.partition` — the code
path of ``partplan partition`` (the CLI adds only the read and printing):

  metis      partition(g, k, model="graph")                       (METIS 5.1 k-way)
  mtk        partition(g, k, objective="total")                   (Mt-KaHyPar DEFAULT, km1)
  kaminpar   partition(g, k, model="graph", backend="kaminpar")   (KaMinPar default context)
  pp-default partition(g, k)                                      (the default pipeline, pipeline.py)
  pp-fast    partition(g, k, preset="fast")                       (METIS + km1 V-cycle)
  pp-quality partition(g, k, preset="quality")                    (Mt-KaHyPar QUALITY + hubs + max-both refine)

Figures are exact (1D forward column-net volume of the partition, recomputed
here with :func:`partplan.metrics.volume1d.volume_matrix`): wall seconds,
total volume, max(send, recv), compute imbalance (row nnz), and the graph's
hub bound (a lower bound on max recv for any ε-balanced partition,
:func:`bench_refine.hub_recv_bound`).

The set is split into two fixed halves, each spanning several families:

  TUNE   email-Enron (social), power (power grid), copter2 (FE mesh),
         cond-mat-2003 (collaboration), rmat14 (R-MAT), webcrawl-150k (web crawl)
  REPORT polblogs (web, directed), as-22july06 (internet AS), delaunay_n15
         (FE mesh / geometric), astro-ph (collaboration), rmat15 (R-MAT),
         webcrawl-325k (web crawl)

The two web crawls are generated (:func:`partplan.datasets.web_crawl`: hosts with power-law
sizes, 75 % host-local links, power-law in-degrees with hubs, a crawl tree; seeds 1 and 2,
symmetrized): no package carries a web crawl of this size (docs/design/planner.md).

The default pipeline was chosen on TUNE only (``--tune`` adds the candidate
pipelines); REPORT is reported untouched. Ratios: vs the best peer per graph
(the lowest max(send, recv) among METIS, Mt-KaHyPar, KaMinPar; total volume vs
the lowest peer total volume), vs plain Mt-KaHyPar, and wall vs METIS — all
measured in the same run (the machine is shared: compare ratios, not seconds).
The summary also gives max(send, recv) vs the best peer *as balanced*: only
peers whose partition is ε-balanced or has no heavier heaviest part count
(where a row outweighs the ε-limit, as on as-22july06 at k = 64, a peer that
overloads a part further is not solving the same problem). The plain ratio
stays the headline.

Plain Mt-KaHyPar (DEFAULT) gives a partition that depends on the Mt-KaHyPar
calls made before it in this process (its seed does not reset all of its
state; cond-mat-2003 k = 16: 1,868, 1,715, 2,096 over three calls), so a
case's best peer, and every ratio to it, depends on the cases run before it
and can move by 20 % with the default unchanged. ``--peer-repeats R`` runs
it R times per case and keeps its lowest (max(send, recv), total volume),
with every run's figures in the row's ``runs`` (docs/design/planner.md).

Where the gains can still come from: "even" (per row) is (total volume / k) /
max(send, recv), 1.0 when every part sends and receives the mean; the summary's
"at the volume floor" counts cases within 2 % of max(⌈lowest total volume of
the run / k⌉, hub bound) (:func:`volume_floor`): there only a lower total volume
than any method reached lowers the max. The floor's geometric mean vs the best
peer is printed under the summary.

  python benchmarks/bench_families.py --quick            # make bench
  python benchmarks/bench_families.py --k 16 64 256 --json out/families.json
  python benchmarks/bench_families.py --half tune --tune  # the candidates
  python benchmarks/bench_families.py --cli               # + the CLI wall column

Two wall ratios vs METIS: "×METIS wall" (API) is ``partition()`` in one warm
process (compiled kernels loaded once, outside the timings); "×METIS CLI" is
what the time target counts: each of ``partplan partition G.npz -k K -o
x.part.K`` (the default) and ``partplan partition G.npz -k K --engine metis
--model graph -o x.part.K`` run as a fresh subprocess (process start, imports,
numba cache loads, the same read of the same .npz written once per graph,
partitioning, the statistics and the write), median of ``--cli-repeats``
runs each, alternating so load drifts hit both. Only ``--cli-methods`` (default
pp-default; metis is the reference) get the CLI column.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_refine import hub_recv_bound, load_instance  # noqa: E402

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import nonneg_float, positive_int  # noqa: E402

FAMILY = {"email-Enron": "social", "power": "power grid", "copter2": "FE mesh", "cond-mat-2003": "collab",
          "rmat14": "R-MAT", "polblogs": "web (dir.)", "as-22july06": "internet", "delaunay_n15": "FE mesh",
          "astro-ph": "collab", "rmat15": "R-MAT", "webcrawl-150k": "web crawl", "webcrawl-325k": "web crawl",
          # in the registry, in neither half (checks on graphs nothing was tuned on: --graphs mdual ...)
          "mdual": "FE mesh (dual)", "rgg_n_2_15_s0": "random geometric", "amazon0601": "co-purchase"}
# a third set, held out from every choice: graphs generated by networkx (seeded), of
# families in neither half; ``--half generated``
FAMILY.update({"grid2d": "2D grid", "grid3d": "3D grid", "regular6": "random 6-regular",
               "ba4": "preferential attachment", "ws": "small world", "tree": "random tree",
               "caveman": "relaxed caveman", "sbm": "stochastic block model",
               "scalefree-dir": "scale-free (dir.)", "bipartite": "random bipartite"})
TUNE = ("email-Enron", "power", "copter2", "cond-mat-2003", "rmat14", "webcrawl-150k")
REPORT = ("polblogs", "as-22july06", "delaunay_n15", "astro-ph", "rmat15", "webcrawl-325k")
# the generated web crawls: (pages, seed) of partplan.datasets.web_crawl, symmetrized
WEB = {"webcrawl-150k": (150_000, 1), "webcrawl-325k": (325_729, 2)}
GENERATED = ("grid2d", "grid3d", "regular6", "ba4", "ws", "tree", "caveman", "sbm", "scalefree-dir", "bipartite")
QUICK = ("power", "polblogs", "webcrawl-150k")   # the web crawl without plain Mt-KaHyPar (minutes there)
PEERS = ("metis", "mtk", "kaminpar")
PRESETS = ("pp-default", "pp-default-1t", "pp-fast", "pp-quality")
METHODS = {
    "metis": dict(model="graph"),
    "mtk": dict(objective="total"),
    "kaminpar": dict(model="graph", backend="kaminpar"),
    "pp-default": dict(),
    "pp-default-1t": dict(threads=1),      # the default on one core: the same partition, its serial wall
    "pp-fast": dict(preset="fast"),
    "pp-quality": dict(preset="quality"),
}
# candidate default pipelines (TUNE half only): preset "auto" with its knobs
CANDIDATES = {
    "auto:m+k": dict(preset="auto", starts="metis,kaminpar"),
    "auto:m+k,noref": dict(preset="auto", starts="metis,kaminpar", refine=False),
    "auto:tol0.01": dict(preset="auto", volume_tolerance=0.01),
    "auto:m+k+mtkgraph": dict(preset="auto", starts="metis,kaminpar,mtkahypar"),
    "auto:rounds1": dict(preset="auto", refine_rounds=1),
    "auto:work16": dict(preset="auto", refine_work=16.0),
    "auto:work32": dict(preset="auto", refine_work=32.0),
    "auto:rw0.5": dict(preset="auto", rounds_work=0.5),
    "auto:rw0.1": dict(preset="auto", rounds_work=0.1),
    # refine/volume cycles (the default runs 3), with or without the rounds
    "auto:cyc1": dict(preset="auto", refine_cycles=1),          # one cycle
    "auto:cyc6": dict(preset="auto", refine_cycles=6),
    "auto:r1,cyc6": dict(preset="auto", refine_rounds=1, refine_cycles=6),
    "auto:r1,cyc6,w0.1": dict(preset="auto", refine_rounds=1, refine_cycles=6, cycle_work=0.1),
}


def generated_graph(name: str, seed: int = 1):
    """One graph of GENERATED (networkx generators, seed 1; 20-33 k vertices). Undirected ones are
    symmetric without self loops; "scale-free (dir.)" keeps its direction (rows without out-links).
    Another ``seed`` draws another graph of the same family (the grids are the same at any seed)."""
    import networkx as nx

    from partplan.graph import Graph

    if name == "scalefree-dir":
        nxg = nx.DiGraph(nx.scale_free_graph(20000, seed=seed))
        nxg.remove_edges_from(list(nx.selfloop_edges(nxg)))
    else:
        nxg = {"grid2d": lambda: nx.grid_2d_graph(180, 180),
               "grid3d": lambda: nx.grid_graph(dim=[32, 32, 32]),
               "regular6": lambda: nx.random_regular_graph(6, 20000, seed=seed),
               "ba4": lambda: nx.barabasi_albert_graph(20000, 4, seed=seed),
               "ws": lambda: nx.watts_strogatz_graph(30000, 8, 0.05, seed=seed),
               "tree": lambda: getattr(nx, "random_labeled_tree", getattr(nx, "random_tree", None))(30000, seed=seed),
               "caveman": lambda: nx.relaxed_caveman_graph(1000, 20, 0.1, seed=seed),
               "sbm": lambda: nx.stochastic_block_model(
                   [500] * 40, [[0.02 if i == j else 0.0004 for j in range(40)] for i in range(40)], seed=seed),
               "bipartite": lambda: nx.bipartite.random_graph(10000, 15000, 0.0005, seed=seed)}[name]()
    nxg = nx.convert_node_labels_to_integers(nxg, ordering="sorted")
    e = np.array(list(nxg.edges()), dtype=np.int64).reshape(-1, 2)
    return Graph.from_edges(e[:, 0], e[:, 1], n=nxg.number_of_nodes(), symmetrize=not nxg.is_directed(),
                            self_loops="remove", name=name)


def web_graph(name: str):
    """One of the generated web crawls (:data:`WEB`), symmetrized."""
    from partplan.datasets import web_crawl

    n, seed = WEB[name]
    return web_crawl(n, seed=seed, name=name)


def _figures(g, part, k, eps):
    from partplan.metrics.volume1d import volume_matrix

    vol, _ = volume_matrix(g.indptr, g.indices, part, k)
    send, recv = vol.sum(axis=1), vol.sum(axis=0)
    load = np.bincount(part, weights=g.row_nnz, minlength=k)
    w = np.maximum(g.row_nnz, 1)
    bal = np.bincount(part, weights=w, minlength=k).max()
    return {"total_volume": int(send.sum()), "max_send_recv": int(np.maximum(send, recv).max()),
            "compute_imbalance": float(load.max() / load.mean() - 1.0), "max_balance_weight": int(bal),
            "balance_ok": bool(bal <= math.floor((1 + eps) * -(-int(w.sum()) // k)))}


# peers whose partition depends on the calls before it in the process (plain Mt-KaHyPar): --peer-repeats
# runs them that many times and keeps the lowest (max(send, recv), total volume)
UNREPEATABLE = ("mtk",)


def run_graph(g, k, methods, *, eps=0.03, seed=0, progress=None, peer_repeats: int = 1):
    from partplan.partition.api import partition

    w = np.maximum(g.row_nnz, 1)
    cap = int(math.floor((1 + eps) * -(-int(w.sum()) // k)))
    rows = []
    for name, kw in methods.items():
        runs = []
        for _ in range(peer_repeats if name in UNREPEATABLE else 1):
            t0 = time.perf_counter()
            p = partition(g, k, imbalance=eps, seed=seed, stats=False, **kw)
            runs.append((time.perf_counter() - t0, p, _figures(g, p.part, k, eps)))
        wall = float(np.median([t for t, _, _ in runs]))
        _, p, fig = min(runs, key=lambda x: (x[2]["max_send_recv"], x[2]["total_volume"]))
        r = {"graph": g.name, "family": FAMILY.get(g.name, "?"), "n": g.n, "nnz": g.nnz, "k": k,
             "method": name, "wall_s": wall, "backend": p.backend, **fig}
        if len(runs) > 1:   # every run's figures: the spread of an unrepeatable peer
            r["runs"] = [[f["max_send_recv"], f["total_volume"], round(t, 2)] for t, _, f in runs]
        if "auto" in p.info:
            r["chosen_start"] = p.info["auto"]["chosen"]
        rows.append(r)
        if progress:
            progress(f"{g.name} k={k} {name}: {wall:.2f} s, max {r['max_send_recv']}, tv {r['total_volume']}")
    hub = hub_recv_bound(g, cap)
    for r in rows:
        r["hub_bound"] = hub
    return rows


# the CLI command of each method (fresh process: the target counts process start and the read)
CLI_ARGS = {"metis": ["--engine", "metis", "--model", "graph"], "pp-default": [], "pp-default-1t": ["--threads", "1"],
            "pp-fast": ["--preset", "fast"],
            "kaminpar": ["--engine", "kaminpar", "--model", "graph"], "mtk": ["--objective", "total"]}


def cli_walls(path, k, methods, *, eps=0.03, seed=0, repeats=3, tmp=None):
    """Median wall seconds of ``partplan partition PATH -k K ... -o x.part.K`` per method, fresh
    processes run alternately (method order rotates each repeat)."""
    exe = str(Path(sys.executable).with_name("partplan"))
    times = {m: [] for m in methods}
    for rep in range(repeats):
        order = methods[rep % len(methods):] + methods[:rep % len(methods)]
        for m in order:
            out = Path(tmp or tempfile.gettempdir()) / f"x.part.{k}"
            cmd = [exe, "partition", str(path), "-k", str(k), "--imbalance", str(eps), "--seed", str(seed),
                   "-q", "-o", str(out), *CLI_ARGS[m]]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"})
            times[m].append(time.perf_counter() - t0)
    return {m: float(np.median(v)) for m, v in times.items()}


FLOOR_NEAR = 1.02      # "at the volume floor": max(send, recv) within 2 % of volume_floor


def gmean(x):
    x = [v for v in x if v is not None and v > 0 and math.isfinite(v)]
    return float(np.exp(np.mean(np.log(x)))) if x else float("nan")


def ratios(rows):
    """Per (graph, k): each method vs the best peer, vs plain Mt-KaHyPar and vs METIS' wall."""
    out = {}
    for key in sorted({(r["graph"], r["k"]) for r in rows}):
        rs = {r["method"]: r for r in rows if (r["graph"], r["k"]) == key}
        peers = [rs[p] for p in PEERS if p in rs]
        if not peers:
            continue
        best_max = min(p["max_send_recv"] for p in peers)
        best_tv = min(p["total_volume"] for p in peers)
        floor = volume_floor(rs.values(), key[1])
        for m, r in rs.items():
            r["vs_best_peer_max"] = r["max_send_recv"] / max(best_max, 1)
            r["vs_best_peer_tv"] = r["total_volume"] / max(best_tv, 1)
            if "mtk" in rs:
                r["vs_mtk_max"] = r["max_send_recv"] / max(rs["mtk"]["max_send_recv"], 1)
            if "metis" in rs:
                r["wall_vs_metis"] = r["wall_s"] / max(rs["metis"]["wall_s"], 1e-9)
                if "cli_wall_s" in r and "cli_wall_s" in rs["metis"]:
                    r["cli_vs_metis"] = r["cli_wall_s"] / max(rs["metis"]["cli_wall_s"], 1e-9)
            r["best_peer"] = min(peers, key=lambda p: p["max_send_recv"])["method"]
            r["evenness"] = r["total_volume"] / key[1] / max(r["max_send_recv"], 1)
            r["volume_floor"] = floor
            r["floor_vs_best_peer"] = floor / max(best_max, 1)
            # only the peers whose partition is as balanced: ε-balanced, or no heavier heaviest part
            # (where no partition can be ε-balanced, a peer that overloads more is not a rival)
            fair = [p for p in peers if p["balance_ok"] or p["max_balance_weight"] <= r["max_balance_weight"]]
            if fair:
                r["vs_balanced_peer_max"] = r["max_send_recv"] / max(min(p["max_send_recv"] for p in fair), 1)
        out[key] = rs
    return out


def volume_floor(rows, k: int) -> int:
    """The max(send, recv) a partition would have if it sent the lowest total volume of ``rows``
    (every method of one case) spread evenly over the k parts, or the hub bound when that is
    higher: ``max(⌈min TV / k⌉, hub bound)`` (rows of H). Not a lower bound for every partition
    (a lower total volume than any method reached lowers it; geometry may keep parts from being
    even), but where a method's max is at this floor only a lower total volume lowers it.

    >>> volume_floor([{"total_volume": 100, "hub_bound": 3}, {"total_volume": 90, "hub_bound": 3}], 4)
    23
    """
    rows = list(rows)
    return max(-(-min(r["total_volume"] for r in rows) // k), max(r["hub_bound"] for r in rows))


def table(rows, title):
    lines = [f"## {title}", "",
             "| graph (family) | k | hub bound | method | wall s | ×METIS wall (API) | CLI s | ×METIS CLI | "
             "total vol | max(s,r) | even | vs best peer (max) | vs best peer (tv) | vs mtk (max) | imbal |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    nan = float("nan")
    for r in rows:
        cli = (f"{r['cli_wall_s']:.2f} | {r.get('cli_vs_metis', nan):.2f}" if "cli_wall_s" in r else " | ")
        start = f"[{r['chosen_start']}]" if "chosen_start" in r else ""
        lines.append(f"| {r['graph']} ({r['family']}) | {r['k']} | {r['hub_bound']} | {r['method']}{start} | "
                     f"{r['wall_s']:.2f} | {r.get('wall_vs_metis', nan):.2f} | {cli} | "
                     f"{r['total_volume']} | {r['max_send_recv']} | {r.get('evenness', nan):.3f} | "
                     f"{r.get('vs_best_peer_max', nan):.3f} | {r.get('vs_best_peer_tv', nan):.3f} | "
                     f"{r.get('vs_mtk_max', nan):.3f} | {r['compute_imbalance']:.3f}"
                     f"{'' if r['balance_ok'] else ' (!)'} |")
    return "\n".join(lines)


def summary(rows, title):
    methods = list(dict.fromkeys(r["method"] for r in rows))
    lines = [f"### {title}: geometric means over (graph, k)", "",
             "| method | max vs best peer | worst graph | max vs best peer as balanced | "
             "tv vs best peer (max over graphs) | max vs mtk | "
             "wall vs METIS (API) | wall vs METIS (CLI) | all balanced | at the volume floor |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for m in methods:
        rs = [r for r in rows if r["method"] == m]
        worst = max(rs, key=lambda r: r.get("vs_best_peer_max", 0))
        lines.append(f"| {m} | {gmean(r.get('vs_best_peer_max') for r in rs):.3f} | "
                     f"{worst.get('vs_best_peer_max', float('nan')):.3f} ({worst['graph']} k={worst['k']}) | "
                     f"{gmean(r.get('vs_balanced_peer_max') for r in rs):.3f} | "
                     f"{gmean(r.get('vs_best_peer_tv') for r in rs):.3f} "
                     f"({max(r.get('vs_best_peer_tv', 0) for r in rs):.3f}) | "
                     f"{gmean(r.get('vs_mtk_max') for r in rs):.3f} | "
                     f"{gmean(r.get('wall_vs_metis') for r in rs):.2f} | "
                     f"{gmean(r.get('cli_vs_metis') for r in rs):.2f} | {all(r['balance_ok'] for r in rs)} | "
                     f"{sum(r.get('max_send_recv', 0) <= FLOOR_NEAR * r.get('volume_floor', -1) for r in rs)} "
                     f"of {len(rs)} |")
    floors = {(r["graph"], r["k"]): r["floor_vs_best_peer"] for r in rows if "floor_vs_best_peer" in r}
    lines += ["", f"Volume floor (max(⌈lowest total volume of the run / k⌉, hub bound)) vs the best peer: "
              f"{gmean(floors.values()):.3f} (geometric mean over {len(floors)} cases); a method within "
              f"{FLOOR_NEAR - 1:.0%} of it is counted \"at the volume floor\": every part sends and receives "
              f"about the mean, so only a lower total volume lowers its max."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", nargs="+", default=None, help="graph names (default: both halves)")
    ap.add_argument("--half", choices=("tune", "report", "both", "generated"), default="both",
                    help="generated: the held-out networkx families (GENERATED), in neither half")
    ap.add_argument("--k", nargs="+", type=positive_int, default=[16, 64, 256])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS) + list(CANDIDATES))
    ap.add_argument("--tune", action="store_true", help="add the candidate default pipelines")
    ap.add_argument("--quick", action="store_true", help=f"{', '.join(QUICK)} at k = 16, 64, no pp-quality; "
                    "no plain Mt-KaHyPar on the web crawl")
    ap.add_argument("--max-k-ratio", type=nonneg_float, default=0.0,
                    help="skip k > n * this (0: no limit); k = 256 on larger graphs takes Mt-KaHyPar minutes")
    ap.add_argument("--fetch", action="store_true", help="fetch registry datasets that are not cached")
    ap.add_argument("--json", default=None, help="write all rows here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli", action="store_true", help="also time the CLI (fresh processes) vs METIS's CLI")
    ap.add_argument("--cli-methods", nargs="+", default=["pp-default"], choices=[m for m in CLI_ARGS if m != "metis"])
    ap.add_argument("--cli-repeats", type=positive_int, default=3)
    ap.add_argument("--peer-repeats", type=positive_int, default=1,
                    help="runs of each peer whose partition depends on the calls before it in the process (plain "
                         "Mt-KaHyPar); the lowest (max(send, recv), total volume) is the peer's row, its wall the median")
    ap.add_argument("--mtk-time-limit", type=nonneg_float, default=None,
                    help="skip plain Mt-KaHyPar at k = 256 on graphs where it took longer than this at k = 64")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    graphs = a.graphs or {"tune": TUNE, "report": REPORT, "both": TUNE + REPORT, "generated": GENERATED}[a.half]
    ks = a.k
    methods = {m: ({**METHODS, **CANDIDATES})[m] for m in a.methods}
    if a.quick:
        graphs, ks = a.graphs or QUICK, [16, 64]
        methods.pop("pp-quality", None)
    if a.tune:
        methods.update(CANDIDATES)
    say = None if a.quiet else (lambda msg: print(f"# {msg}", file=sys.stderr, flush=True))
    # warm up the compiled kernels (numba) and the engines outside the timings
    from partplan.graph import Graph
    from partplan.partition.api import partition
    g0 = Graph.from_edges(np.arange(200), (np.arange(200) * 7 + 1) % 200, n=200, symmetrize=True)
    for kw in [kw for m, kw in METHODS.items() if m != "pp-quality"] + [CANDIDATES["auto:m+k"]]:
        partition(g0, 4, stats=False, **kw)
    rows = []
    tmpd = tempfile.TemporaryDirectory(prefix="bench-families-")
    for name in graphs:
        g = (generated_graph(name) if name in GENERATED else web_graph(name) if name in WEB
             else load_instance(name, fetch=a.fetch))
        if g is None:
            continue
        path = None
        if a.cli:
            from partplan.io import write_npz
            path = Path(tmpd.name) / f"{name}.npz"
            write_npz(g, path)
        mtk64 = None
        for k in ks:
            if k > g.n or (a.max_k_ratio and k > g.n * a.max_k_ratio):
                continue
            ms = dict(methods)
            if a.quick and name in WEB:
                ms.pop("mtk", None)
            if k > 64 and a.mtk_time_limit is not None and mtk64 is not None and mtk64 > a.mtk_time_limit:
                ms.pop("mtk", None)
                if say:
                    say(f"{name} k={k}: plain Mt-KaHyPar skipped (took {mtk64:.1f} s at k = 64)")
            got = run_graph(g, k, ms, seed=a.seed, progress=say, peer_repeats=a.peer_repeats)
            if k == 64:
                mtk64 = next((r["wall_s"] for r in got if r["method"] == "mtk"), None)
            if a.cli:
                cm = ["metis"] + [m for m in a.cli_methods if m in ms]
                walls = cli_walls(path, k, cm, seed=a.seed, repeats=a.cli_repeats, tmp=tmpd.name)
                for r in got:
                    if r["method"] in walls:
                        r["cli_wall_s"] = walls[r["method"]]
                if say:
                    say(f"{name} k={k} CLI: " + ", ".join(f"{m} {v:.2f} s" for m, v in walls.items()))
            rows += got
    ratios(rows)
    tune = [r for r in rows if r["graph"] not in REPORT and r["graph"] not in GENERATED]
    rep = [r for r in rows if r["graph"] in REPORT]
    gen = [r for r in rows if r["graph"] in GENERATED]
    print(f"# bench_families: {len(rows)} rows; ratios vs peers measured in this run (shared 2-core machine)")
    if gen:
        import networkx as nx
        print(f"# GENERATED graphs from networkx {nx.__version__} (seed 1)")
    for part_rows, title in ((tune, "TUNE half"), (rep, "REPORT half"), (gen, "GENERATED (held out)")):
        if part_rows:
            print(table(part_rows, title))
            print()
            print(summary(part_rows, title))
            print()
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
