"""PNG of a BFS report's per-level work and bytes (matplotlib Agg, atomic write).

Left: edges examined per level (one line per search, top-down levels as
circles, bottom-up as triangles). Right: payload bytes per level as sent
(chosen modes) against all-sparse and all-dense, summed over searches.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plot import _figure, _save


def plot_levels(rep: dict, path) -> Path:
    """Draw ``rep["searches"][*]["levels"]`` (a ``run bfs`` / ``run graph500`` report) to ``path``."""
    fig = _figure(10, 4)
    ax1, ax2 = fig.subplots(1, 2)
    depth = max((len(s["levels"]) for s in rep["searches"]), default=0)
    sent, sparse, dense = (np.zeros(depth) for _ in range(3))
    for s in rep["searches"]:
        lv = s["levels"]
        x = np.arange(len(lv))
        e = np.array([v["edges_examined"] for v in lv], dtype=float)
        ax1.plot(x, np.maximum(e, 1), color="0.7", lw=0.6)
        bu = np.array([v["direction"] == "bottom-up" for v in lv])
        ax1.scatter(x[~bu], np.maximum(e[~bu], 1), s=8, marker="o", color="tab:blue")
        ax1.scatter(x[bu], np.maximum(e[bu], 1), s=10, marker="^", color="tab:orange")
        sent[:len(lv)] += [v["bytes"] for v in lv]
        sparse[:len(lv)] += [v["bytes_sparse"] for v in lv]
        dense[:len(lv)] += [v["bytes_dense"] for v in lv]
    ax1.set_yscale("log")
    ax1.set_xlabel("level")
    ax1.set_ylabel("edges examined (o top-down, ^ bottom-up)")
    x = np.arange(depth)
    ax2.bar(x - 0.27, np.maximum(sparse, 1), 0.27, label="all sparse", color="tab:green")
    ax2.bar(x, np.maximum(dense, 1), 0.27, label="all dense", color="tab:purple")
    ax2.bar(x + 0.27, np.maximum(sent, 1), 0.27, label="sent (chosen per pair)", color="tab:red")
    ax2.set_yscale("log")
    ax2.set_xlabel("level")
    ax2.set_ylabel("payload bytes, summed over searches")
    ax2.legend(fontsize=8)
    fig.suptitle(f"BFS n={rep['n']:,} nnz={rep['nnz']:,} ranks={rep['ranks']} {rep['layout']} "
                 f"({len(rep['searches'])} searches)")
    return _save(fig, path)
