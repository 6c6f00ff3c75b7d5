"""Handing a :class:`Hypergraph` to the C++ partitioners without per-pin
Python objects where the engine allows it.

- ``arrays``: numpy pin arrays split per net (mtkahypar accepts a list of
  int64 numpy sub-arrays; only the list of m views is Python objects).
- ``file``: an hMetis ``.hgr`` file written from numpy (fmt 11: net weights
  first on each net line, one vertex weight per line after the nets), read
  by ``mtk.hypergraph_from_file`` / ``kahypar.createHypergraphFromFile``.

:func:`write_hmetis` builds the text in a few vectorized numpy passes (all
numbers formatted at once, separators chosen by position) and writes it
atomically.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...hypergraph import Hypergraph
from ..._atomic import atomic_path


def _join_lines(values: np.ndarray, line_ptr: np.ndarray) -> str:
    """Text of integer ``values`` split into lines at ``line_ptr``."""
    if values.size == 0:
        return ""
    sep = np.full(values.size, " ", dtype="<U1")
    ends = line_ptr[1:] - 1
    sep[ends[ends >= 0]] = "\n"
    txt = np.char.add(values.astype(np.int64).astype(str), sep)
    return "".join(txt.tolist())


def hmetis_text(hg: Hypergraph) -> str:
    """hMetis text of ``hg`` with net and vertex weights (fmt 11, 1-based)."""
    m = hg.m
    nw = hg.net_weights if hg.net_weights is not None else np.ones(m, dtype=np.int64)
    vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
    sizes = np.diff(hg.net_ptr)
    line_ptr = np.concatenate([[0], np.cumsum(sizes + 1)]).astype(np.int64)
    vals = np.empty(line_ptr[-1], dtype=np.int64)
    vals[line_ptr[:-1]] = nw
    mask = np.ones(vals.size, dtype=bool)
    mask[line_ptr[:-1]] = False
    vals[mask] = hg.pins + 1
    head = f"{m} {hg.n} 11\n"
    return head + _join_lines(vals, line_ptr) + _join_lines(vw, np.arange(hg.n + 1, dtype=np.int64))


def write_hmetis(hg: Hypergraph, path: str | os.PathLike) -> Path:
    """Write ``hg`` as an hMetis file atomically (temp file + os.replace)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(hmetis_text(hg))
    return path


def pin_arrays(hg: Hypergraph) -> list:
    """List of m int64 numpy views, one per net (the ``arrays`` handoff)."""
    return np.split(hg.pins, hg.net_ptr[1:-1]) if hg.m else []
