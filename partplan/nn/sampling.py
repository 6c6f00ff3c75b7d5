"""The stochastic model's samplers drawn where no rank holds the matrix.

Mini-batch training (:mod:`partplan.nn.minibatch`) needs every rank to know the batch: the hops
``(rows, cols)`` of sampled nonzeros of the plan's matrix ``Â`` and their values. The samplers of
:mod:`partplan.models.stochastic` draw them from the whole matrix; here each rank holds only its
own rows (:class:`HeldRows`, read from its shard) and the batch is the same one, bit for bit:

* every rank makes the sampler's random draws alike — one generator seeded alike, the same calls
  in the same order with the same sizes — since the sizes depend only on what every rank knows
  (the batch so far and the degrees of the rows drawn from);
* what a draw needs of the matrix comes from the rows' owners, one world all-gather at a time: each
  rank sends the values of its own rows' entries to every other rank, and every rank puts them back
  in the batch's order (every rank knows which rank owns each entry, so the sizes are known before
  anything is sent, and nothing is sent twice).

Collectives per batch (all-gathers of float64 values; ids are exact below 2^53):

* ``neighbor``: per hop, the frontier's degrees, then the kept entries' columns and values;
* ``saint-node``: the induced subgraph's entry counts per node, then its columns and values
  (the degree vector, n values, is gathered once when the sampler is made: the draw is weighted
  by degree);
* ``saint-rw``: one per walk step (the walkers' next vertices), then the induced subgraph's two.

:attr:`DistSampler.sent_values` counts the values all ranks send to them: an all-gather of m values
sends m · (p − 1).

Memory per rank: its rows (indptr, global column ids, values), the partition vector (n int64)
and, for the SAINT samplers, the degree vector (n int64); plus the batch itself.

>>> import numpy as np, scipy.sparse as sp
>>> from partplan import Graph
>>> from partplan.models.stochastic import make_sampler
>>> from partplan.runtime.comm import LocalComm
>>> A = sp.random(40, 40, density=0.2, random_state=0, format="csr")
>>> g = Graph(A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data)
>>> part = np.arange(40) % 3
>>> held = [HeldRows.from_graph(g, part, r) for r in range(3)]
>>> ds = DistSampler(make_sampler("neighbor:8:3,2"), held, LocalComm(3, []), part)
>>> hops, vals = ds.sample(np.random.default_rng(5))
>>> want = make_sampler("neighbor:8:3,2").sample(g, np.random.default_rng(5))
>>> all(np.array_equal(a, b) for h, w in zip(hops, want) for a, b in zip(h, w))
True
"""
from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..models.stochastic import NeighborSampler, SaintNodeSampler, SaintRandomWalkSampler, _segment_rank
from ..program.exchange import segments

__all__ = ["DistSampler", "HeldRows"]

EXACT_IDS = 2 ** 53      # ids travel as float64 in the all-gathers: exact below this


class HeldRows:
    """The rows one rank holds of the plan's matrix, in global ids.

    ids : int64, the rows' global ids, ascending. indptr : int64[ids.size + 1]. cols : int64
    global column ids, ascending within each row. vals : float64 values (1 for a pattern plan).
    """

    def __init__(self, rank: int, ids: np.ndarray, indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray):
        self.rank, self.ids, self.indptr, self.cols, self.vals = int(rank), ids, indptr, cols, vals

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays held."""
        return int(self.ids.nbytes + self.indptr.nbytes + self.cols.nbytes + self.vals.nbytes)

    @classmethod
    def from_coo(cls, rank: int, ids: np.ndarray, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray):
        """From the entries (global row, global column, value) of the rows ``ids``."""
        ids = np.sort(np.asarray(ids, dtype=np.int64))
        o = np.lexsort((cols, rows))
        at = np.searchsorted(ids, rows[o])
        counts = np.bincount(at, minlength=ids.size)
        indptr = np.zeros(ids.size + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(rank, ids, indptr, np.ascontiguousarray(cols[o], dtype=np.int64),
                   np.ascontiguousarray(vals[o], dtype=np.float64))

    @classmethod
    def from_shard(cls, manifest: dict, shard, part: np.ndarray) -> "HeldRows":
        """Rank ``shard.rank``'s rows from its shard of a 1D plan (the forward program's matrix),
        copying only its own entries out of the mapped shard; they must be the rows ``part`` gives
        the rank (else one PlanError)."""
        from ..runtime.traversal import program_ext_ids, program_parts
        chain, spmm, _ = program_parts(manifest, "forward")
        s = spmm["id"]
        row_ids = np.asarray(shard[f"{s}.row_ids"], dtype=np.int64)
        ip = np.asarray(shard[f"{s}.indptr"], dtype=np.int64)
        ext = program_ext_ids(shard, chain, "forward")
        perm = np.argsort(row_ids, kind="stable")          # rows by global id
        lo, hi = ip[perm], ip[perm + 1]
        sel = segments(lo, hi - lo)
        cols = ext[np.asarray(shard[f"{s}.indices"])[sel]]
        vals = (np.asarray(shard[f"{s}.data"], dtype=np.float64)[sel] if shard.has(f"{s}.data")
                else np.ones(sel.size))
        del sel
        deg = hi - lo
        indptr = np.zeros(row_ids.size + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        ids = row_ids[perm]
        if not np.array_equal(ids, np.flatnonzero(part == shard.rank)):
            raise PlanError(f"rank {shard.rank}: its shard computes rows other than those partition.arrow gives it")
        if cols.size > 1:                                    # columns ascending within each row
            down = np.diff(cols) <= 0
            starts = indptr[1:-1]
            down[starts[(starts > 0) & (starts < cols.size)] - 1] = False     # a new row may start lower
            if down.any():
                o = np.lexsort((cols, np.repeat(np.arange(ids.size, dtype=np.int64), deg)))
                cols, vals = cols[o], vals[o]
        return cls(shard.rank, ids, indptr, cols, vals)

    @classmethod
    def from_graph(cls, graph, part: np.ndarray, rank: int) -> "HeldRows":
        """Rank ``rank``'s rows (``part == rank``) of a :class:`~partplan.graph.Graph`."""
        ids = np.flatnonzero(part == rank)
        lo, hi = graph.indptr[ids], graph.indptr[ids + 1]
        sel = segments(lo, hi - lo)
        rows = np.repeat(ids, hi - lo)
        vals = np.ones(sel.size) if graph.data is None else graph.data[sel]
        return cls.from_coo(rank, ids, rows, graph.indices[sel], vals)

    def _at(self, rows: np.ndarray) -> np.ndarray:
        """Positions of held rows ``rows`` in :attr:`ids`."""
        return np.searchsorted(self.ids, rows)

    def degrees(self, rows: np.ndarray) -> np.ndarray:
        """int64: the nonzeros of the held rows ``rows``."""
        at = self._at(rows)
        return self.indptr[at + 1] - self.indptr[at]

    def entries(self, rows: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(global columns, values) of entry ``offsets[i]`` of held row ``rows[i]``."""
        e = self.indptr[self._at(rows)] + offsets
        return self.cols[e], self.vals[e]


class DistSampler:
    """Draw the batches of ``sampler`` (a :mod:`partplan.models.stochastic` neighbor, SAINT node
    or SAINT random-walk sampler) from the rows ``held`` by ``comm``'s local ranks.

    held : one :class:`HeldRows` per local rank of ``comm``, in ``comm.local`` order.
    part : int64[n] the rank of every row. :meth:`sample` gives what ``sampler.sample(Â, rng)``
    gives on the whole matrix, with the hops' values.
    """

    def __init__(self, sampler, held: list[HeldRows], comm, part: np.ndarray):
        if not isinstance(sampler, (NeighborSampler, SaintNodeSampler, SaintRandomWalkSampler)):
            raise PlanError(f"mini-batch training draws its batches where no rank holds the matrix: it takes the "
                            f"neighbor, saint-node and saint-rw samplers (a spec), not {type(sampler).__name__}")
        if [h.rank for h in held] != list(comm.local):    # the all-gathers take the pieces in rank order
            raise PlanError(f"DistSampler: held rows of ranks {[h.rank for h in held]}, but this process runs "
                            f"ranks {list(comm.local)}: one HeldRows per local rank, in that order")
        self.sampler, self.held, self.comm, self.part = sampler, held, comm, part
        self.n = int(part.size)
        if self.n >= EXACT_IDS:
            raise PlanError(f"mini-batch sampling sends vertex ids as float64: n = {self.n} is 2^53 or more")
        self.sent_values = 0
        self.deg = None
        if not isinstance(sampler, NeighborSampler):      # the SAINT draws read every degree
            self.deg = self._gather(part, [h.degrees(h.ids) for h in held])[:, 0].astype(np.int64)

    def _gather(self, owner: np.ndarray, pieces: list[np.ndarray]) -> np.ndarray:
        """float64[owner.size, w]: position i's values from rank ``owner[i]``. ``pieces[j]`` holds local
        rank j's values of the positions it owns, in position order (float64[count, w]; 1-D: w = 1)."""
        w = 1 if np.ndim(pieces[0]) == 1 else int(np.shape(pieces[0])[1])
        if owner.size == 0:             # the same on every rank: every rank skips it
            return np.zeros((0, w))
        counts = np.bincount(owner, minlength=self.comm.world)
        self.sent_values += int(owner.size) * w * (self.comm.world - 1)
        got = self.comm.allgather_world(pieces, counts)[0]
        out = np.empty_like(got)
        out[np.argsort(owner, kind="stable")] = got
        return out

    def _entries(self, rows: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(columns int64, values) of entry ``offsets[i]`` of row ``rows[i]``, from the rows' owners."""
        owner = self.part[rows]
        pieces = []
        for h in self.held:
            mine = owner == h.rank
            pieces.append(np.column_stack(h.entries(rows[mine], offsets[mine])))
        s = self._gather(owner, pieces)
        return s[:, 0].astype(np.int64), s[:, 1]

    def _row_degrees(self, rows: np.ndarray) -> np.ndarray:
        if self.deg is not None:
            return self.deg[rows]
        owner = self.part[rows]
        return self._gather(owner, [h.degrees(rows[owner == h.rank]) for h in self.held])[:, 0].astype(np.int64)

    def _induced(self, nodes: np.ndarray) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """The entries among ``nodes`` (ascending): rows, columns, values in row, then column order."""
        owner = self.part[nodes]
        counts, parts = [], []
        for h in self.held:
            mine = np.flatnonzero(owner == h.rank)
            at = h._at(nodes[mine])
            lo, hi = h.indptr[at], h.indptr[at + 1]
            sel = segments(lo, hi - lo)
            seg = np.repeat(mine, hi - lo)
            pos = np.searchsorted(nodes, h.cols[sel])
            keep = (pos < nodes.size) & (nodes[np.minimum(pos, nodes.size - 1)] == h.cols[sel])
            counts.append(np.bincount(seg[keep], minlength=nodes.size)[mine])
            parts.append(np.column_stack((h.cols[sel[keep]], h.vals[sel[keep]])))
        per_node = self._gather(owner, counts)[:, 0].astype(np.int64)
        # a node's entries come from its owner, in row then column order: the entries' owners
        s = self._gather(np.repeat(owner, per_node), parts)
        rows = np.repeat(nodes, per_node)
        return (rows, s[:, 0].astype(np.int64)), s[:, 1]

    def sample(self, rng: np.random.Generator) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[np.ndarray]]:
        """(hops, values): the hops ``(rows, cols)`` of ``sampler.sample(Â, rng)`` and the
        values ``Â[rows, cols]`` of each hop; ``rng`` advances as it does there."""
        s = self.sampler
        if isinstance(s, NeighborSampler):
            return self._neighbor(s, rng)
        if isinstance(s, SaintNodeSampler):
            d = self.deg.astype(np.float64) + 1e-12
            nodes = np.unique(rng.choice(self.n, size=s.budget, replace=True, p=d / d.sum()))
            hop, vals = self._induced(nodes)
            return [hop] * s.layers, [vals] * s.layers
        cur = rng.integers(0, self.n, size=s.roots)
        visited = [cur]
        for _ in range(s.walk_length):
            d = self.deg[cur]
            off = np.minimum((rng.random(cur.size) * d).astype(np.int64), np.maximum(d - 1, 0))
            walk = d > 0
            nxt = cur.copy()
            nxt[walk] = self._entries(cur[walk], off[walk])[0]
            cur = nxt
            visited.append(cur)
        hop, vals = self._induced(np.unique(np.concatenate(visited)))
        return [hop] * s.layers, [vals] * s.layers

    def _neighbor(self, s: NeighborSampler, rng):
        pool = np.arange(self.n) if s.seeds is None else np.asarray(s.seeds, dtype=np.int64)
        frontier = np.sort(rng.choice(pool, size=min(s.batch_size, pool.size), replace=False))
        hops, values = [], []
        for fan in s.fanouts:
            deg = self._row_degrees(frontier)
            seg = np.repeat(np.arange(frontier.size, dtype=np.int64), deg)
            off = np.arange(seg.size, dtype=np.int64) - np.repeat(np.cumsum(deg) - deg, deg)
            if fan >= 0:
                keep = _segment_rank(seg, frontier.size, rng) < fan
                seg, off = seg[keep], off[keep]
            rows = frontier[seg]
            cols, vals = self._entries(rows, off)
            hops.append((rows, cols))
            values.append(vals)
            frontier = np.union1d(frontier, cols)
        return hops, values
