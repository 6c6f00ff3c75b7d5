"""Graph500 pieces: the five validation checks of a BFS parent array
(:func:`validate_bfs_tree`, usable on any parent array), search keys, the TEPS
edge count and the harmonic-mean TEPS with its Norris standard deviation.

The checks (Graph500 specification, kernel 2 validation), on the input edge
tuples (src, dst) — self loops and duplicates allowed:

1. the parents form a tree rooted at the root: ``parent[root] == root``, every
   reached vertex's parent chain ends at the root, no cycle, ids in range;
2. tree edges join levels differing by exactly one (levels as reported by the
   search if given, else the tree depths);
3. every input edge with both ends reached spans at most one level
   (directed u → v: ``level[v] <= level[u] + 1``);
4. the tree spans the root's component: no input edge with exactly one
   reached end (directed: none from a reached u to an unreached v);
5. every (vertex, parent) pair is an input edge (directed: parent → vertex).

TEPS edges: the input tuples with a reached endpoint, self loops and
duplicates counted once each (the specification's "number of input edge
tuples within the component traversed").

Examples
--------
>>> import numpy as np
>>> src, dst = np.array([0, 1, 2]), np.array([1, 2, 3])        # path 0-1-2-3
>>> validate_bfs_tree(src, dst, 0, np.array([0, 0, 1, 2])).ok
True
>>> validate_bfs_tree(src, dst, 0, np.array([0, 0, 0, 2])).failed   # (2, 0) is not an edge
[5]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PartplanError

CHECKS = {1: "tree rooted at the root, no cycle", 2: "tree edges join levels differing by one",
          3: "input edges span at most one level", 4: "the tree spans the root's component",
          5: "every (vertex, parent) pair is an input edge"}


class ValidationError(PartplanError):
    """A BFS parent array failed a Graph500 check."""


@dataclass
class Validation:
    """Result of :func:`validate_bfs_tree`: ``failed`` check numbers (empty =
    valid), a message per failed check, tree ``levels`` (int64[n], -1
    unreached) and ``nedge`` (TEPS edge count)."""

    failed: list[int] = field(default_factory=list)
    messages: dict = field(default_factory=dict)
    levels: np.ndarray | None = None
    nedge: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed

    def fail(self, check: int, msg: str) -> None:
        if check not in self.failed:
            self.failed.append(check)
            self.messages[check] = f"check {check} ({CHECKS[check]}): {msg}"

    def raise_if_invalid(self) -> None:
        if self.failed:
            raise ValidationError("; ".join(self.messages[c] for c in sorted(self.failed)))


def tree_depths(parent: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray]:
    """Depth of every reached vertex in the parent tree by pointer doubling
    (O(n log n), vectorized); returns (depth int64[n] with -1 for unreached,
    bool[n] reached vertices whose chain does not end at the root)."""
    n = parent.size
    reached = parent >= 0
    nxt = np.where(reached, parent, n)  # unreached -> sink n
    nxt = np.append(nxt, n)
    d = np.append(reached.astype(np.int64), 0)
    nxt[root], d[root] = root, 0
    for _ in range(max(1, int(n).bit_length()) + 1):
        d = d + d[nxt]
        nxt = nxt[nxt]
    bad = reached & (nxt[:n] != root)
    depth = np.where(reached & ~bad, d[:n], -1)
    return depth, bad


class BfsValidator:
    """The five checks for many searches on one edge list: the sorted edge
    keys of check 5 are built once (``validate_bfs_tree`` = one-shot use)."""

    def __init__(self, src, dst, n: int, *, directed: bool = False):
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        self.n, self.directed = int(n), bool(directed)
        self._keys = None

    def _edge_keys(self) -> np.ndarray:
        if self._keys is None:
            s, d, n = self.src, self.dst, self.n
            self._keys = np.unique((s * n + d) if self.directed else (np.minimum(s, d) * n + np.maximum(s, d)))
        return self._keys

    def check(self, root: int, parent, levels=None) -> Validation:
        """Run the checks on one parent array (see :func:`validate_bfs_tree`)."""
        src, dst, n, directed = self.src, self.dst, self.n, self.directed
        parent = np.asarray(parent)
        res = Validation()
        if parent.shape != (n,) or not np.issubdtype(parent.dtype, np.integer):
            res.fail(1, f"the parent array must be int[{n}], got {parent.dtype}{list(parent.shape)}")
            return res
        parent = parent.astype(np.int64)
        if not 0 <= root < n:
            res.fail(1, f"root {root} is not a vertex id in [0, {n})")
            return res
        oor = (parent < -1) | (parent >= n)
        if oor.any():
            v = int(np.flatnonzero(oor)[0])
            res.fail(1, f"parent[{v}] = {int(parent[v])} is not a vertex id or -1")
            return res
        if parent[root] != root:
            res.fail(1, f"parent[root={root}] = {int(parent[root])}, not the root itself")
            return res
        depth, bad = tree_depths(parent, root)
        if bad.any():
            v = int(np.flatnonzero(bad)[0])
            res.fail(1, f"vertex {v}'s parent chain does not reach the root (cycle or unreached ancestor)")
        lv = depth if levels is None else np.asarray(levels, dtype=np.int64)
        reached = parent >= 0
        nonroot = np.flatnonzero(reached & ~bad)
        nonroot = nonroot[nonroot != root]
        if levels is not None and lv[root] != 0:
            res.fail(2, f"the root has level {int(lv[root])}")
        wrong = nonroot[lv[nonroot] != lv[parent[nonroot]] + 1]
        if wrong.size:
            v = int(wrong[0])
            res.fail(2, f"vertex {v} has level {int(lv[v])}, its parent {int(parent[v])} level "
                        f"{int(lv[parent[v]])}")
        ru, rv = reached[src], reached[dst]
        both = ru & rv
        lu, lw = lv[src[both]], lv[dst[both]]
        far = (lw > lu + 1) if directed else (np.abs(lu - lw) > 1)
        if far.any():
            e = int(np.flatnonzero(both)[np.flatnonzero(far)[0]])
            res.fail(3, f"edge {int(src[e])}–{int(dst[e])} joins levels {int(lv[src[e]])} and {int(lv[dst[e]])}")
        half = (ru & ~rv) if directed else (ru ^ rv)
        if half.any():
            e = int(np.flatnonzero(half)[0])
            res.fail(4, f"edge {int(src[e])}–{int(dst[e])} has one end reached and the other not")
        if nonroot.size:  # 5: (parent[v], v) among the input edges
            key = self._edge_keys()
            pu, pv = parent[nonroot], nonroot
            q = (pu * n + pv) if directed else (np.minimum(pu, pv) * n + np.maximum(pu, pv))
            k = np.searchsorted(key, q)
            hit = (k < key.size) & (key[np.minimum(k, key.size - 1)] == q) if key.size else np.zeros(q.size, bool)
            if not hit.all():
                v = int(pv[np.flatnonzero(~hit)[0]])
                res.fail(5, f"(vertex {v}, parent {int(parent[v])}) is not an input edge")
        res.levels = depth
        res.nedge = int(np.count_nonzero(ru | rv))
        return res


def validate_bfs_tree(src, dst, root: int, parent, *, levels=None, n: int | None = None,
                      directed: bool = False) -> Validation:
    """Run the five Graph500 checks on ``parent`` (int[n], -1 = unreached,
    ``parent[root] == root``) for the input edges ``src[e] – dst[e]``.

    ``levels``: the search's own level per vertex (checked in 2 against the
    tree); default the tree depths. ``directed``: edges are u → v.
    Returns a :class:`Validation` (``.ok``, ``.failed``, ``.messages``,
    ``.nedge``); call ``.raise_if_invalid()`` for an exception. For many
    searches on one graph use :class:`BfsValidator`.
    """
    n = int(np.asarray(parent).size if n is None else n)
    return BfsValidator(src, dst, n, directed=directed).check(root, parent, levels)


def search_keys(src, dst, n: int, count: int = 64, seed: int = 0) -> np.ndarray:
    """``count`` distinct random vertices with degree >= 1 not counting self
    loops (fewer if the graph has fewer), deterministic for ``seed``."""
    src, dst = np.asarray(src), np.asarray(dst)
    loop = src == dst
    deg = np.bincount(src[~loop], minlength=n) + np.bincount(dst[~loop], minlength=n)
    cand = np.flatnonzero(deg > 0)
    from .._seed import numpy_seed
    rng = np.random.default_rng(np.random.SeedSequence([numpy_seed(seed), 500]))   # any integer seed
    return np.sort(rng.choice(cand, size=min(count, cand.size), replace=False)) if cand.size else cand


def teps_stats(nedges, times) -> dict:
    """Graph500 statistics of TEPS = nedge / time: harmonic mean and its
    Norris standard deviation, with min / quartiles / max of TEPS and time."""
    m = np.asarray(nedges, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    teps = m / t
    k = teps.size
    if np.any(teps == 0):   # a search that traversed no edge (a root without edges): the harmonic mean is 0
        hm, std = 0.0, 0.0
    else:
        hm = k / np.sum(1.0 / teps)
        std = float(np.sqrt(np.sum((1.0 / teps - 1.0 / hm) ** 2)) / (k - 1) * hm * hm) if k > 1 else 0.0
    q = np.quantile(teps, [0, 0.25, 0.5, 0.75, 1.0])
    tq = np.quantile(t, [0, 0.25, 0.5, 0.75, 1.0])
    return {"teps_harmonic_mean": float(hm), "teps_harmonic_stddev": std,
            "teps_min": float(q[0]), "teps_firstquartile": float(q[1]), "teps_median": float(q[2]),
            "teps_thirdquartile": float(q[3]), "teps_max": float(q[4]),
            "time_min_s": float(tq[0]), "time_median_s": float(tq[2]), "time_max_s": float(tq[4]),
            "time_mean_s": float(t.mean()), "nedge_mean": float(m.mean()), "searches_counted": int(k)}
