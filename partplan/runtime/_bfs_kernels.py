"""numba kernels of one BFS level on one rank (loops over a level's edges).

Both directions give vertex v the parent of smallest global id among its
in-neighbours in the frontier, so the tree does not depend on the direction
or the number of ranks.
"""
from __future__ import annotations

import numba
import numpy as np

from .. import _cache  # noqa: F401  (numba's cache directory, set before any kernel is decorated)


@numba.njit(cache=True, nogil=True)
def top_down(cindptr, crows, front_cols, ext_ids, visited, cand):
    """Expand columns ``front_cols`` (ext positions) of the CSC block: an own
    row not yet visited gets the smallest frontier id as candidate parent.
    Returns (new own rows, edges examined); ``cand`` holds -1 outside them."""
    new = np.empty(visited.size, np.int64)
    k = 0
    edges = 0
    for t in range(front_cols.size):
        c = front_cols[t]
        g = ext_ids[c]
        for e in range(cindptr[c], cindptr[c + 1]):
            r = crows[e]
            edges += 1
            if visited[r]:
                continue
            if cand[r] < 0:
                cand[r] = g
                new[k] = r
                k += 1
            elif g < cand[r]:
                cand[r] = g
    return new[:k], edges


@numba.njit(cache=True, nogil=True)
def bottom_up(indptr, indices, ext_ids, visited, front_ext, cand):
    """Every unvisited own row scans its in-edges (sorted by global id) and
    stops at the first frontier vertex. Returns (new own rows, edges examined)."""
    new = np.empty(visited.size, np.int64)
    k = 0
    edges = 0
    for r in range(visited.size):
        if visited[r]:
            continue
        for e in range(indptr[r], indptr[r + 1]):
            edges += 1
            c = indices[e]
            if front_ext[c]:
                cand[r] = ext_ids[c]
                new[k] = r
                k += 1
                break
    return new[:k], edges


@numba.njit(cache=True, nogil=True)
def relax(cindptr, crows, cdata, front_cols, dist_ext, dist, changed):
    """Bellman-Ford over the frontier columns: dist[r] = min(dist[r], dist_ext[c] + w).
    Marks changed rows; returns edges examined."""
    edges = 0
    for t in range(front_cols.size):
        c = front_cols[t]
        dc = dist_ext[c]
        for e in range(cindptr[c], cindptr[c + 1]):
            r = crows[e]
            edges += 1
            nd = dc + (1.0 if cdata.size == 0 else cdata[e])
            if nd < dist[r]:
                dist[r] = nd
                changed[r] = True
    return edges
