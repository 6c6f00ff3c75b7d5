"""The planner benchmark: block, random, METIS graph model,
Mt-KaHyPar hypergraph, and hypergraph + bottleneck refinement on a list of
datasets and k values; the seed-paper table (total volume, max send, max recv,
messages, compute imbalance, partition time) normalized to random and to
METIS, geometric means, CSV / JSON / PNG.

Every figure is measured by :func:`partplan.analyze` on the returned
partition (not taken from the partitioners). Optionally also the stochastic
model: expected mini-batch volume of the stochastic-hypergraph partition vs
the full-batch hypergraph partition on fresh held-out batches.

Used by ``partplan bench`` and ``benchmarks/bench_planner.py``.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DatasetError, PartplanError
from ..graph import Graph
from ..metrics import analyze
from .._atomic import atomic_path
from .methods import METHOD_NAMES, run_method
from ..partition.options import DEFAULT_IMBALANCE

DATASETS = ("email-Enron", "as-22july06", "astro-ph", "cond-mat-2003", "copter2", "mdual", "delaunay_n15",
            "rgg_n_2_15_s0", "rmat16")
QUICK_DATASETS = ("email-Enron", "delaunay_n15", "rmat14")
REFINED = "hypergraph+refine"  # the hypergraph method's partition, then bottleneck refinement (timed apart)
METHODS = ("block", "random", "metis", "hypergraph", REFINED)  # the default set
ALL_METHODS = METHOD_NAMES + (REFINED,)  # every choice: the method table (bench/methods.py) + REFINED
FIGURES = ("total_volume", "max_send", "max_recv", "max_send_recv", "messages", "compute_imbalance", "time_s")


def check_bench_names(names) -> None:
    """Refuse a dataset name that is neither registered nor ``rmatS`` before
    any work (a typo is an error; an unfetchable registered graph is skipped
    later with its reason)."""
    from ..datasets.registry import entry

    for name in names:
        if name.startswith("rmat"):
            scale = name[4:].lstrip(":")
            if not scale.isdigit() or not 1 <= int(scale) <= 30:
                raise DatasetError(f"bad R-MAT name {name!r}; use rmatS with 1 <= S <= 30, e.g. rmat16")
        else:
            entry(name)  # DatasetError naming the close matches


def load_bench_graph(name: str) -> Graph:
    """A registered dataset (fetched if needed) or ``rmatS`` (Graph500 R-MAT,
    scale S, edge factor 16, seed 1, symmetrized, self loops removed)."""
    from .. import datasets

    if name.startswith("rmat"):
        try:
            scale = int(name[4:].lstrip(":"))
        except ValueError:
            raise DatasetError(f"bad R-MAT name {name!r}; use rmatS, e.g. rmat16") from None
        return datasets.rmat(scale, seed=1, name=f"rmat{scale}")
    g = datasets.load(name, fetch=True)
    if not isinstance(g, Graph):
        raise DatasetError(f"{name} is a hypergraph, not a graph")
    return g


def _row(graph: Graph, part: np.ndarray, k: int, seconds: float) -> dict:
    s = analyze(graph, part, k, backward=False)
    return {"total_volume": s.total_volume, "max_send": s.max_send, "max_recv": s.max_recv,
            "max_send_recv": int(max(s.max_send, s.max_recv)), "messages": s.messages,
            "compute_imbalance": float(s.compute_load.max() / s.compute_load.mean() - 1), "time_s": seconds}


def run_methods(graph: Graph, k: int, *, methods=METHODS, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                preset: str = "DEFAULT", threads: int | None = None, refine_time_limit: float | None = None,
                progress: Callable[[str], None] | None = None) -> dict:
    """{method: figures} for one graph and k (methods that cannot run are
    reported as {"skipped": reason})."""

    say = progress or (lambda m: None)
    out: dict = {}
    hyper_part, hyper_t = None, None
    for m in methods:
        say(f"{graph.name} k={k}: {m}")
        t0 = time.perf_counter()
        try:
            if m in METHOD_NAMES:
                part, _ = run_method(graph, m, k, imbalance=imbalance, seed=seed, preset=preset, threads=threads)
                if m == "hypergraph":
                    hyper_part, hyper_t = part, time.perf_counter() - t0
            elif m == REFINED:
                try:
                    from ..partition.refinement.refine import refine
                except ImportError:
                    out[m] = {"skipped": "partplan.partition.refinement.refine not available"}
                    continue
                if hyper_part is None:
                    hyper_part, _ = run_method(graph, "hypergraph", k, imbalance=imbalance, seed=seed,
                                               preset=preset, threads=threads)
                    hyper_t = time.perf_counter() - t0
                t1 = time.perf_counter()
                part, _ = refine(graph, hyper_part, k, objective="max-both", imbalance=imbalance, seed=seed,
                                 time_limit=refine_time_limit)
                row = _row(graph, part, k, hyper_t + time.perf_counter() - t1)
                row["refine_time_s"] = time.perf_counter() - t1
                out[m] = row
                continue
            else:
                raise PartplanError(f"unknown bench method {m!r}; choose from {', '.join(ALL_METHODS)}")
        except PartplanError as exc:
            out[m] = {"skipped": str(exc)}
            continue
        out[m] = _row(graph, part, k, time.perf_counter() - t0)
    return out


def _geomean(x) -> float | None:
    x = [v for v in x if v is not None and v > 0 and math.isfinite(v)]
    return float(math.exp(sum(math.log(v) for v in x) / len(x))) if x else None


def summarize(rows: list[dict]) -> dict:
    """Geometric means over (dataset, k) of each method's ratio to random and to
    METIS, per figure (ratios with a zero denominator are left out)."""
    out: dict = {}
    methods = sorted({r["method"] for r in rows if "total_volume" in r}, key=lambda m: (
        ALL_METHODS.index(m) if m in ALL_METHODS else 99, m))
    for ref in ("random", "metis"):
        out[f"vs_{ref}"] = {}
        for m in methods:
            d = {}
            for f in FIGURES:
                vals = [r.get(f"{f}/{ref}") for r in rows if r["method"] == m]
                d[f] = _geomean(vals)
            d["instances"] = sum(1 for r in rows if r["method"] == m and r.get(f"total_volume/{ref}"))
            out[f"vs_{ref}"][m] = d
    return out


def stochastic_compare(graph: Graph, k: int, *, sampler: str = "neighbor:256:10,5", theta: float = 0.02,
                       delta: float = 0.05, batches: int = 1000, seed: int = 0, preset: str = "DEFAULT",
                       threads: int | None = None, imbalance: float = DEFAULT_IMBALANCE,
                       progress: Callable[[str], None] | None = None) -> dict:
    """Expected mini-batch volume (on ``batches`` fresh batches, held-out seed)
    of the stochastic-hypergraph partition vs the full-batch hypergraph one."""
    from ..models import expected_volume, stochastic_hypergraph
    from ..partition import engines as backends

    say = progress or (lambda m: None)
    say(f"{graph.name} k={k}: full-batch hypergraph partition")
    t0 = time.perf_counter()
    full = backends.hypergraph(graph, k, imbalance=imbalance, seed=seed, preset=preset, threads=threads)
    t_full = time.perf_counter() - t0
    say(f"{graph.name} k={k}: stochastic hypergraph ({sampler}, θ={theta}, δ={delta})")
    t0 = time.perf_counter()
    sm = stochastic_hypergraph(graph, k, sampler, theta=theta, delta=delta, seed=seed, progress=progress)
    part, _ = backends.mtkahypar_hypergraph(sm.hypergraph, k, imbalance=imbalance, seed=seed, preset=preset,
                                            threads=threads)
    t_st = time.perf_counter() - t0
    say(f"{graph.name} k={k}: evaluating both on {batches} fresh batches")
    held_out = seed + 1_000_003
    ev_full = expected_volume(graph, full, sampler, k=k, batches=batches, seed=held_out)
    ev_st = expected_volume(graph, part, sampler, k=k, batches=batches, seed=held_out)
    fs, ss = analyze(graph, full, k, backward=False), analyze(graph, part, k, backward=False)
    return {"graph": graph.name, "k": k, "sampler": sampler, "theta": theta, "delta": delta,
            "batches_eval": batches, "model": sm.to_dict(),
            "full_batch": {"expected_volume": ev_full["mean"], "stderr": ev_full["stderr"],
                           "mean_max_recv": ev_full["mean_max_recv"], "full_graph_volume": fs.total_volume,
                           "compute_imbalance": float(fs.compute_load.max() / fs.compute_load.mean() - 1),
                           "time_s": t_full},
            "stochastic": {"expected_volume": ev_st["mean"], "stderr": ev_st["stderr"],
                           "mean_max_recv": ev_st["mean_max_recv"], "full_graph_volume": ss.total_volume,
                           "compute_imbalance": float(ss.compute_load.max() / ss.compute_load.mean() - 1),
                           "time_s": t_st},
            "ratio": ev_st["mean"] / ev_full["mean"] if ev_full["mean"] else None}


def run_bench(datasets=QUICK_DATASETS, ks=(16, 64), *, methods=METHODS, out: str | os.PathLike | None = None,
              imbalance: float = DEFAULT_IMBALANCE, seed: int = 0, preset: str = "DEFAULT", threads: int | None = None,
              refine_time_limit: float | None = None, stochastic: str | None = None,
              stochastic_k: int = 16, stochastic_batches: int = 1000, stochastic_sampler: str = "neighbor:256:10,5",
              stochastic_theta: float = 0.02,
              progress: Callable[[str], None] | None = None) -> dict:
    """Run every method on every (dataset, k); returns {"rows", "geomean",
    "skipped", "stochastic", "meta"} and, with ``out``, writes
    ``bench_planner.csv``, ``bench_planner.json`` and ``bench_planner.png``."""
    say = progress or (lambda m: None)
    rows, skipped = [], []
    t_all = time.perf_counter()
    for name in datasets:
        try:
            say(f"loading {name}")
            g = load_bench_graph(name)
        except (PartplanError, OSError) as exc:
            skipped.append({"dataset": name, "reason": str(exc)})
            say(f"skipping {name}: {exc}")
            continue
        for k in ks:
            if k > g.n:
                skipped.append({"dataset": name, "k": k, "reason": f"k > n={g.n}"})
                continue
            res = run_methods(g, k, methods=methods, imbalance=imbalance, seed=seed, preset=preset,
                              threads=threads, refine_time_limit=refine_time_limit, progress=progress)
            ref = {r: res.get(r) for r in ("random", "metis")}
            for m, fig in res.items():
                row = {"dataset": name, "n": g.n, "nnz": g.nnz, "k": k, "method": m}
                if "skipped" in fig:
                    skipped.append({"dataset": name, "k": k, "method": m, "reason": fig["skipped"]})
                    continue
                row.update(fig)
                for rname, rfig in ref.items():
                    if rfig and "skipped" not in rfig:
                        for f in FIGURES:
                            den = rfig[f]
                            row[f"{f}/{rname}"] = (fig[f] / den) if den else None
                rows.append(row)
    result = {"rows": rows, "geomean": summarize(rows), "skipped": skipped, "stochastic": None,
              "meta": {"datasets": list(datasets), "ks": list(ks), "methods": list(methods),
                       "imbalance": imbalance, "seed": seed, "preset": preset, "threads": threads,
                       "seconds": None}}
    if stochastic:
        try:
            g = load_bench_graph(stochastic)
            result["stochastic"] = stochastic_compare(g, stochastic_k, sampler=stochastic_sampler,
                                                      theta=stochastic_theta, batches=stochastic_batches, seed=seed,
                                                      preset=preset, threads=threads, imbalance=imbalance,
                                                      progress=progress)
        except PartplanError as exc:
            skipped.append({"dataset": stochastic, "method": "stochastic", "reason": str(exc)})
    result["meta"]["seconds"] = time.perf_counter() - t_all
    if out is not None:
        write_outputs(result, out)
    return result


def _atomic_write(path: Path, data: bytes):
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_outputs(result: dict, out: str | os.PathLike) -> list[Path]:
    """CSV of the rows, JSON of everything, PNG of the geometric means."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    cols = ["dataset", "n", "nnz", "k", "method", *FIGURES, "refine_time_s",
            *[f"{f}/{r}" for r in ("random", "metis") for f in FIGURES]]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    w.writeheader()
    w.writerows(result["rows"])
    paths = [d / "bench_planner.csv", d / "bench_planner.json"]
    _atomic_write(paths[0], buf.getvalue().encode())
    _atomic_write(paths[1], (json.dumps(result, indent=1, default=float) + "\n").encode())
    if result["rows"]:
        paths.append(plot_geomeans(result, d / "bench_planner.png"))
    return paths


def plot_geomeans(result: dict, path: Path) -> Path:
    """Bars: geometric-mean ratio to METIS of each figure, per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gm = result["geomean"]["vs_metis"]
    methods = [m for m in gm if gm[m]["total_volume"] is not None]
    figs = ("total_volume", "max_send", "max_recv", "messages", "time_s")
    fig, ax = plt.subplots(figsize=(max(8, 1.8 * len(methods) + 3), 4.5))
    x = np.arange(len(methods))
    wd = 0.8 / len(figs)
    for i, f in enumerate(figs):
        vals = [gm[m][f] or 0 for m in methods]
        bars = ax.bar(x + (i - (len(figs) - 1) / 2) * wd, vals, wd, label=f)
        for b, v in zip(bars, vals):
            ax.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=6, xytext=(0, 1), textcoords="offset points")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, methods)
    ax.set_ylabel("geometric mean ratio to METIS (log)")
    ax.set_title("partplan planner benchmark: " + ", ".join(result["meta"]["datasets"]) + " · k = "
                 + ", ".join(map(str, result["meta"]["ks"])), fontsize=9)
    ax.legend(fontsize=8, ncol=len(figs))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    path = Path(path)
    _atomic_write(path, buf.getvalue())
    return path


def format_table(result: dict) -> str:
    """The seed-paper-style text table plus geometric means."""
    lines = []
    hdr = (f"{'dataset':<16}{'k':>4} {'method':<18}{'total':>10}{'max snd':>9}{'max rcv':>9}{'msgs':>7}"
           f"{'comp.imb':>9}{'time s':>8}{'tot/rand':>9}{'tot/METIS':>10}{'mx/METIS':>9}")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for r in result["rows"]:
        def ratio(key):
            v = r.get(key)
            return f"{v:.3f}" if v is not None else "-"
        lines.append(f"{r['dataset']:<16}{r['k']:>4} {r['method']:<18}{r['total_volume']:>10}{r['max_send']:>9}"
                     f"{r['max_recv']:>9}{r['messages']:>7}{r['compute_imbalance']:>9.3f}{r['time_s']:>8.2f}"
                     f"{ratio('total_volume/random'):>9}{ratio('total_volume/metis'):>10}"
                     f"{ratio('max_send_recv/metis'):>9}")
    for ref in ("random", "metis"):
        lines.append("")
        lines.append(f"geometric mean ratio to {ref} (over dataset × k):")
        lines.append(f"  {'method':<18}{'total':>8}{'max snd':>9}{'max rcv':>9}{'max s/r':>9}{'msgs':>8}"
                     f"{'time':>10}{'inst':>6}")
        for m, d in result["geomean"][f"vs_{ref}"].items():
            def g(f):
                if d[f] is None:
                    return "-"
                return f"{d[f]:.3g}" if f == "time_s" else f"{d[f]:.3f}"
            lines.append(f"  {m:<18}{g('total_volume'):>8}{g('max_send'):>9}{g('max_recv'):>9}"
                         f"{g('max_send_recv'):>9}{g('messages'):>8}{g('time_s'):>10}{d['instances']:>6}")
    st = result.get("stochastic")
    if st:
        lines.append("")
        lines.append(f"stochastic model ({st['graph']}, k={st['k']}, {st['sampler']}, "
                     f"{st['model']['batches']} training batches, {st['batches_eval']} fresh batches):")
        for key in ("full_batch", "stochastic"):
            s = st[key]
            lines.append(f"  {key:<11} expected mini-batch volume {s['expected_volume']:.1f} ± {s['stderr']:.1f}"
                         f"  (full-graph volume {s['full_graph_volume']}, time {s['time_s']:.2f} s)")
        lines.append(f"  ratio stochastic / full-batch: {st['ratio']:.3f}")
    if result["skipped"]:
        lines.append("")
        lines.append("skipped: " + "; ".join(
            f"{s.get('dataset')}{' k=' + str(s['k']) if 'k' in s else ''}"
            f"{' ' + s['method'] if 'method' in s else ''}: {s['reason']}" for s in result["skipped"]))
    return "\n".join(lines)
