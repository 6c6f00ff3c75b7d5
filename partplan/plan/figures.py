"""What the volume figures of a plan or partition count, said where they are printed.

A stats summary (:meth:`partplan.metrics.CommStats.summary`, a layout's
:meth:`~partplan.metrics.layouts.LayoutStats.summary`, a routed one's) has a
``total_volume`` and per-rank ``max_send`` / ``max_recv``; they do not always
count the same rows. In 1.5D the total is the exchange between row blocks
(each row once per receiving block), while a rank's send and recv also count
its ring all-reduce among the block's replicas — so the maximum can exceed
the total. :func:`volume_line` and :func:`volume_rows` name what each figure
counts, so no printed maximum sits above its total without the reason.

>>> print(volume_line({"layout": "1.5d", "shape": [4, 2], "total_volume": 10, "total_reduce_rows": 30,
...                    "max_send": 17, "max_recv": 16, "messages": 12}))  # doctest: +NORMALIZE_WHITESPACE
total volume 10 rows (exchange between the 4 row blocks: each row once per block that receives it)
 + all-reduce 30 rows (a ring among each block's 2 replicas); max send 17, max recv 16 rows per rank
 (its exchange + its all-reduce rows, so a maximum can exceed the exchange total), messages 12
 (the exchange's; the all-reduce's apart)
"""
from __future__ import annotations

__all__ = ["volume_line", "volume_rows", "total_meaning", "max_meaning"]


def _n(v) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _kind(st: dict) -> str:
    """"replicas" (1.5D), "fold" (2D), "routes" (routed) or "rows" (1D): the layout's capability that
    decides what its figures count (asked of the layout, never read from its name)."""
    from ..layouts import layout_family
    lay = layout_family(str(st.get("layout") or "1d"))
    return "replicas" if lay.replicas else "fold" if lay.fold else "routes" if lay.routes else "rows"


def total_meaning(st: dict, per: str = "rank") -> str:
    """What ``total_volume`` counts in this summary (``per``: what a part is, "rank" or "row block")."""
    kind = _kind(st)
    if kind == "replicas":
        b = (st.get("shape") or [None])[0]
        blocks = ("the one row block" if b == 1 else f"the {b} row blocks") if b is not None else "the row blocks"
        return f"exchange between {blocks}: each row once per block that receives it"
    if kind == "fold":
        return "expand + fold on the grid: each row of H or partial row of Z once per rank that receives it"
    if kind == "routes":
        return "summed over the route's steps: a forwarded row counts at every hop"
    return f"each row of H once per {per} that receives it"


def max_meaning(st: dict) -> str:
    """What ``max_send`` / ``max_recv`` count in this summary."""
    kind = _kind(st)
    if kind == "replicas" and st.get("total_reduce_rows"):
        return "its exchange + its all-reduce rows, so a maximum can exceed the exchange total"
    if kind == "routes":
        return "every step it sends or forwards in"
    return "the rows it sends / receives; at most the total"


def volume_line(st: dict, per: str = "rank") -> str:
    """One line: the total, the per-rank maxima and the messages, each named."""
    line = f"total volume {_n(st.get('total_volume'))} rows ({total_meaning(st, per)})"
    if _kind(st) == "replicas" and st.get("total_reduce_rows"):
        c = (st.get("shape") or [None, None])[1]
        line += (f" + all-reduce {_n(st.get('total_reduce_rows'))} rows (a ring among each block's "
                 f"{c if c is not None else 'c'} replicas)")
    line += (f"; max send {_n(st.get('max_send'))}, max recv {_n(st.get('max_recv'))} rows per {per} "
             f"({max_meaning(st)})")
    if "messages" in st:
        what = " (the exchange's; the all-reduce's apart)" if _kind(st) == "replicas" and \
            st.get("total_reduce_rows") else ""
        line += f", messages {_n(st.get('messages'))}{what}"
    return line


def volume_rows(st: dict, prefix: str = "", per: str = "rank") -> list[tuple[str, str]]:
    """(label, value) rows for a key/value table: the total and the maxima with what they count."""
    rows = [(f"{prefix}total_volume", f"{_n(st.get('total_volume'))} rows ({total_meaning(st, per)})")]
    if _kind(st) == "replicas" and st.get("total_reduce_rows"):
        rows.append((f"{prefix}total_reduce_rows", f"{_n(st.get('total_reduce_rows'))} rows (all-reduce among "
                                                   f"each row block's replicas)"))
    why = max_meaning(st)
    rows.append((f"{prefix}max_send", f"{_n(st.get('max_send'))} rows per {per} ({why})"))
    rows.append((f"{prefix}max_recv", f"{_n(st.get('max_recv'))} rows per {per}"))
    return rows
