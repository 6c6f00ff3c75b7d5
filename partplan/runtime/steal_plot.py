"""PNG of per-level load balance with and without frontier stealing
(matplotlib Agg, atomic write): ``load_max_over_mean`` before stealing and
``load_max_over_mean_after`` per level, one pair of lines per run, and the
active ranks (OSteal) on a second axis when they vary."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..plot import _figure, _save


def plot_balance(runs: dict, path, title: str = "") -> Path:
    """``runs``: label -> list of per-level dicts (a search's ``levels`` or
    an SSSP report's ``iterations``) with the steal keys; levels without them
    (bottom-up) are skipped."""
    fig = _figure(8, 4)
    ax = fig.subplots(1, 1)
    ax2 = None
    for k, (label, levels) in enumerate(runs.items()):
        lv = [(i, x) for i, x in enumerate(levels) if x.get("load_max_over_mean") is not None]
        if not lv:
            continue
        x = np.array([i for i, _ in lv])
        b = np.array([v["load_max_over_mean"] for _, v in lv])
        a = np.array([v.get("load_max_over_mean_after") or v["load_max_over_mean"] for _, v in lv])
        col = f"C{k % 10}"
        if k == 0:
            ax.plot(x, b, color="0.5", ls="--", marker="o", ms=3, label="before (no stealing)")
        ax.plot(x, a, color=col, marker="s", ms=3, label=f"after: {label}")
        act = np.array([v.get("active_ranks", 0) for _, v in lv])
        if act.size and act.min() != act.max():
            ax2 = ax2 or ax.twinx()
            ax2.step(x, act, where="mid", color=col, alpha=0.4, lw=1)
            ax2.set_ylabel("active ranks (OSteal)")
    ax.axhline(1.10, color="tab:red", lw=0.6, ls=":")
    ax.set_yscale("log")
    ax.set_xlabel("level")
    ax.set_ylabel("max / mean modeled cost over ranks")
    ax.legend(fontsize=8)
    fig.suptitle(title or "per-level load balance")
    return _save(fig, path)
