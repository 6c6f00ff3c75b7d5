"""Pictures of communication: the k×k volume heat map with per-part send/recv
bars (:func:`plot_volume`) and a method comparison (:func:`plot_compare`).

matplotlib draws everything on the non-interactive Agg canvas (no display
needed; the global pyplot backend is not touched). Files are written
atomically (temporary file, then ``os.replace``). Volumes are in rows of H
(one row = f values of the feature matrix), the unit of
:class:`partplan.metrics.CommStats`.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from partplan import Graph, analyze
>>> g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)
>>> p = plot_volume(analyze(g, [0, 0, 1, 1]), os.path.join(tempfile.mkdtemp(), "v.png"))
>>> p.read_bytes()[:4] == b"\\x89PNG"
True
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ._atomic import atomic_path


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path) -> Path:
    p = Path(path)
    with atomic_path(p, suffix=".png") as tmp:
        fig.savefig(tmp, format="png")
    return p


def _title(stats) -> str:
    name = getattr(stats, "name", "") or ""
    layout = getattr(stats, "layout", None)
    if layout is not None:  # LayoutStats (1.5D / 2D): one cell per rank
        shape = "x".join(str(s) for s in stats.shape)
        return f"{name + ' — ' if name else ''}{layout.upper()} layout {shape}, p={stats.p} ranks"
    return (f"{name + ' — ' if name else ''}1D row-wise SpMM, k={stats.k} parts, "
            f"n={stats.n:,} rows, nnz={stats.nnz:,}")


def plot_volume(stats, path, *, title: str | None = None) -> Path:
    """Heat map of the volume matrix (sender rows, receiver columns; zero
    cells blank) and grouped per-part send/recv bars with the mean line.

    ``stats`` is a :class:`~partplan.metrics.CommStats` (k parts) or a
    :class:`~partplan.metrics.LayoutStats` (p ranks; its all-reduce rows are
    drawn as a third bar when non-zero). Returns the PNG path.
    """
    import matplotlib as mpl

    vol = np.asarray(stats.volume)
    k = vol.shape[0]
    send, recv = np.asarray(stats.send), np.asarray(stats.recv)
    reduce_rows = np.asarray(getattr(stats, "reduce_rows", np.zeros(k, dtype=np.int64)))
    unit = "parts" if getattr(stats, "layout", None) is None else "ranks"
    rows = "rows of H" if unit == "parts" else "rows of H / Z"  # 2D fold moves partial rows of Z

    fig = _figure(13.5, 5.6)
    ax_map, ax_bar = fig.subplots(1, 2, width_ratios=[1, 1.35])
    fig.suptitle(title or _title(stats), fontsize=12)

    cmap = mpl.colormaps["viridis"].with_extremes(bad="#f0f0f0")
    shown = np.ma.masked_equal(vol, 0)
    im = ax_map.imshow(shown, cmap=cmap, interpolation="nearest", aspect="equal",
                       vmin=0, vmax=max(int(vol.max()), 1))
    ax_map.set_xlabel(f"receiving {unit[:-1]} r")
    ax_map.set_ylabel(f"sending {unit[:-1]} q")
    total, msgs = int(vol.sum()), int(np.count_nonzero(vol))
    ax_map.set_title(f"volume[q, r] ({rows})\ntotal {total:,} rows, {msgs:,} messages "
                     f"(grey = no message)", fontsize=10)
    if k <= 32:
        ticks = np.arange(k)
    else:
        ticks = np.unique(np.linspace(0, k - 1, 9).round().astype(int))
    ax_map.set_xticks(ticks)
    ax_map.set_yticks(ticks)
    cb = fig.colorbar(im, ax=ax_map, shrink=0.85)
    cb.set_label(f"{rows} sent q → r")

    x = np.arange(k)
    has_reduce = bool(reduce_rows.any())
    nb = 3 if has_reduce else 2
    w = 0.8 / nb
    ax_bar.bar(x - 0.4 + w / 2, send, w, label=f"send (max {int(send.max()):,})", color="#1f77b4")
    ax_bar.bar(x - 0.4 + 3 * w / 2, recv, w, label=f"recv (max {int(recv.max()):,})", color="#ff7f0e")
    if has_reduce:
        ax_bar.bar(x - 0.4 + 5 * w / 2, reduce_rows, w, label="all-reduce rows", color="#2ca02c")
    mean = total / k if k else 0.0
    ax_bar.axhline(mean, color="black", linestyle="--", linewidth=1,
                   label=f"mean send = mean recv = {mean:,.1f}")
    ax_bar.set_xlabel("part (= rank)" if unit == "parts" else "rank")
    ax_bar.set_ylabel(rows)
    imb_s = send.max() / mean - 1 if mean else 0.0
    imb_r = recv.max() / mean - 1 if mean else 0.0
    ax_bar.set_title(f"per-{unit[:-1]} send / recv volume (imbalance send {imb_s:.0%}, "
                     f"recv {imb_r:.0%})", fontsize=10)
    ax_bar.set_xlim(-0.6, k - 0.4)
    if k <= 32:
        ax_bar.set_xticks(x)
    ax_bar.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=nb + 1, frameon=False)
    ax_bar.grid(axis="y", alpha=0.3)
    return _save(fig, path)


_COMPARE_KEYS = (("total_volume", "total volume"), ("max_send", "max send"), ("max_recv", "max recv"))


def _figures_of(entry) -> dict:
    if isinstance(entry, Mapping):
        missing = [k for k, _ in _COMPARE_KEYS if k not in entry]
        if missing:
            raise ValueError(f"comparison entry lacks {missing}")
        return {k: float(entry[k]) for k, _ in _COMPARE_KEYS}
    return {k: float(getattr(entry, k)) for k, _ in _COMPARE_KEYS}


def plot_compare(table: Mapping, path, *, title: str | None = None, reference: str | None = None) -> Path:
    """Grouped bars comparing partitioning methods.

    ``table`` maps method name → :class:`~partplan.metrics.CommStats` or a
    dict with ``total_volume``, ``max_send``, ``max_recv`` (rows of H). Left
    panel: total volume per method; right panel: max send and max recv per
    method, side by side (they are ~k times smaller than the total). With
    ``reference`` (a method name) each bar is labelled with its ratio to it.
    """
    if not table:
        raise ValueError("plot_compare needs at least one method")
    names = list(table)
    figs = {m: _figures_of(table[m]) for m in names}
    if reference is not None and reference not in figs:
        raise ValueError(f"reference {reference!r} is not one of {names}")

    fig = _figure(max(11.0, 3.0 + 2.2 * len(names)), 5.0)
    ax_tot, ax_max = fig.subplots(1, 2)
    fig.suptitle(title or "communication per 1D SpMM, by partitioning method", fontsize=12)
    x = np.arange(len(names))

    def label(ax, bars, key):
        for b, m in zip(bars, names):
            v = figs[m][key]
            txt = f"{v:,.0f}"
            if reference is not None and figs[reference][key] > 0:
                txt += f"\n×{v / figs[reference][key]:.2f}"
            ax.annotate(txt, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=7.5, xytext=(0, 2), textcoords="offset points")

    bars = ax_tot.bar(x, [figs[m]["total_volume"] for m in names], 0.6, color="#4c72b0")
    label(ax_tot, bars, "total_volume")
    ax_tot.set_title("total volume (all parts)", fontsize=10)
    ax_tot.set_ylabel("rows of H")

    w = 0.38
    b1 = ax_max.bar(x - w / 2, [figs[m]["max_send"] for m in names], w, label="max send", color="#1f77b4")
    b2 = ax_max.bar(x + w / 2, [figs[m]["max_recv"] for m in names], w, label="max recv", color="#ff7f0e")
    label(ax_max, b1, "max_send")
    label(ax_max, b2, "max_recv")
    ax_max.set_title("bottleneck part: max send / max recv", fontsize=10)
    ax_max.set_ylabel("rows of H")
    ax_max.legend(fontsize=9)
    for ax in (ax_tot, ax_max):
        ax.set_xticks(x, names)
        ax.set_xlabel("method" + (f" (ratios vs {reference})" if reference else ""))
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.18)
    return _save(fig, path)
