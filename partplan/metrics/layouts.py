"""Communication volume of the 1.5D and 2D SpMM layouts.

**1.5D** (CAGNET-style, replication factor c): p ranks = (p/c row blocks) × c
replicas; rank ``(i, l)`` = ``i·c + l`` holds row block i of A and H. Block i's
needs from another block q (the 1D volume ``vol[q, i]`` on p/c parts) are
fetched by exactly one replica of i: replica ``l = (q − i) mod c``, from the
same-numbered replica ``(q, l)`` of block q. So the a2a volume summed over ranks
equals the 1D volume on p/c blocks, but each block's load is split over c
ranks. Afterwards each row group all-reduces its n_i × f partial results: a
ring all-reduce moves ``2 (c−1)/c · n_i`` rows per rank.

**2D** (checkerboard over a p = R × C grid): vector entry v lives on rank
``part[v]`` = grid cell ``(part[v] // C, part[v] % C)``; nonzero a_ij is
computed on the rank in grid row of part[i] and grid column of part[j]. Expand:
H[j] goes from part[j] to every rank of its grid column whose grid row holds a
nonzero of column j. Fold: each rank of part[i]'s grid row holding nonzeros of
row i sends one partial row of Z to part[i]. Messages per rank ≤ (R−1) + (C−1).
With ``part = v mod p`` (striped) or contiguous blocks this is the
HPCGraph/CombBLAS 2D distribution; any partition can be laid on the grid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._args import check_int
from ..errors import PartitionError
from ..graph import Graph, check_graph
from ..parts import as_partition
from .cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, alpha_beta_time, check_cost, dtype_bytes
from .stats import imbalance
from .volume1d import check_volume_matrix_size, needed_pairs, volume_matrix


@dataclass
class LayoutStats:
    """Per-rank figures of a 1.5D or 2D exchange (volumes in rows of H / Z)."""

    layout: str
    p: int
    shape: tuple
    volume: np.ndarray        # int64[p, p]: rows sent rank q -> rank r (all phases)
    reduce_rows: np.ndarray   # int64[p]: rows moved by all-reduce per rank (1.5D), 0 for 2D
    f: int = 128
    dtype: str = "float32"
    alpha: float = DEFAULT_ALPHA_S
    beta: float = DEFAULT_BETA_S_PER_BYTE
    replicas: int = 1          # ranks holding each row block (1.5D: c; 2D: 1)
    #: the exchange steps apart when there are several (2D: expand, then fold), step name -> int64[p, p]
    #: rows; None: one step (``volume``). Their sum is ``volume``.
    stages: dict | None = None

    @property
    def send(self):
        return self.volume.sum(axis=1)

    @property
    def recv(self):
        return self.volume.sum(axis=0)

    @property
    def reduce_messages(self) -> np.ndarray:
        """int64[p]: messages each rank sends (and receives) in the 1.5D ring
        all-reduce: 2 (c − 1) (reduce-scatter + all-gather steps); 0 for 2D."""
        c = self.replicas
        return np.full(self.p, 2 * (c - 1) if self.reduce_rows.any() else 0, dtype=np.int64)

    def summary(self) -> dict:
        rb = self.f * dtype_bytes(self.dtype)
        send, recv = self.send + self.reduce_rows, self.recv + self.reduce_rows
        sm, rm = np.count_nonzero(self.volume, axis=1), np.count_nonzero(self.volume, axis=0)
        red = self.reduce_messages
        t = alpha_beta_time(sm + red, rm + red, send * rb, recv * rb, self.alpha, self.beta)
        return {"layout": self.layout, "p": self.p, "shape": list(self.shape),
                "total_volume": int(self.volume.sum()), "total_reduce_rows": int(self.reduce_rows.sum()),
                "max_send": int(send.max()), "max_recv": int(recv.max()),
                "send_imbalance": imbalance(send), "recv_imbalance": imbalance(recv),
                "messages": int(np.count_nonzero(self.volume)),
                "max_send_messages": int(sm.max()), "max_recv_messages": int(rm.max()),
                "reduce_messages_per_rank": int(red.max()),
                "time_estimate_s": float(t.max())}

    def to_dict(self) -> dict:
        return {**self.summary(), "send": self.send.tolist(), "recv": self.recv.tolist(),
                "reduce_rows": self.reduce_rows.tolist()}


def analyze_15d(graph: Graph, block_part, c: int, *, f: int = 128, dtype: str = "float32",
                alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE,
                b: int | None = None, volume: np.ndarray | None = None) -> LayoutStats:
    """1.5D with replication ``c``: ``block_part`` splits rows into b blocks
    (b = p / c; default max(block_part) + 1); returns per-rank figures for
    p = b·c ranks (rank = i·c + l). ``volume``: the blocks' int64[b, b] 1D
    volume matrix when the caller has counted it already."""
    check_graph(graph)
    c = check_int("replication factor c", c, lo=1, hi=1 << 20, error=PartitionError)
    b = check_int("row blocks b", b, lo=1, none_ok=True, error=PartitionError)
    f = check_cost(f, dtype, alpha, beta)
    part, b = as_partition(block_part, graph.n, b)
    check_volume_matrix_size(b * c, f"ranks (b = {b:,} row blocks × c = {c:,} replicas)")
    vol_b = volume_matrix(graph.indptr, graph.indices, part, b)[0] if volume is None else np.asarray(volume)
    p = b * c
    q, i = np.nonzero(vol_b)
    l = (q - i) % c
    vol = np.zeros((p, p), dtype=np.int64)
    vol[q * c + l, i * c + l] = vol_b[q, i]
    return stats_15d(vol, np.bincount(part, minlength=b), c, f=f, dtype=dtype, alpha=alpha, beta=beta)


def ring_allreduce_rows(sizes: np.ndarray, c: int) -> np.ndarray:
    """int64[b · c]: rows each replica j (rank i·c + j) sends — and receives — in a ring
    all-reduce of its block's n_i rows over c replicas. In a ring every replica sends every
    chunk of the buffer but one in the reduce-scatter and again in the all-gather, so a block
    moves exactly 2 (c − 1) · n_i rows whatever the chunking; how they split over the replicas
    depends on the library's chunks, counted here for row chunks s_j = ⌊n_i / c⌋ + [j < n_i mod c]
    as 2 (n_i − s_j).

    >>> ring_allreduce_rows(np.array([31]), 3).tolist()     # chunks 11, 10, 10
    [40, 42, 42]
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    j = np.arange(c, dtype=np.int64)
    chunk = sizes[:, None] // c + (j[None, :] < (sizes % c)[:, None])
    return (2 * (sizes[:, None] - chunk)).reshape(-1).astype(np.int64)


def stats_15d(volume: np.ndarray, block_sizes: np.ndarray, c: int, *, f: int = 128, dtype: str = "float32",
              alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE) -> LayoutStats:
    """The 1.5D figures from the exchange's int64[p, p] ``volume`` (rows rank
    q → rank r) and the rows of each of the b = p / c blocks. Their all-reduce
    among the c replicas is counted as a ring (:func:`ring_allreduce_rows`): 2 (c − 1) · n_i
    rows per block, replica j 2 (n_i − s_j) with s_j its row chunk (none at c = 1). It is a
    model: the runtime hands the block's n_i rows to torch.distributed's all-reduce, whose
    traffic it cannot see (it measures the rows handed)."""
    sizes = np.asarray(block_sizes, dtype=np.int64)
    b = sizes.size
    return LayoutStats("1.5d", b * c, (b, c), volume, ring_allreduce_rows(sizes, c), f, dtype, alpha, beta,
                       replicas=c)


def analyze_2d(graph: Graph, part, R: int, C: int, *, f: int = 128, dtype: str = "float32",
               alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE) -> LayoutStats:
    """2D checkerboard on an R × C grid (rank = row·C + col); ``part`` assigns
    vector entries (rows of H and Z) to the p = R·C ranks."""
    check_graph(graph)
    R = check_int("grid rows R", R, lo=1, hi=1 << 20, error=PartitionError)
    C = check_int("grid columns C", C, lo=1, hi=1 << 20, error=PartitionError)
    f = check_cost(f, dtype, alpha, beta)
    p = R * C
    # expand, fold (each counted, then cast: two at once), their sum
    check_volume_matrix_size(p, f"ranks (an {R:,} × {C:,} grid)", copies=4)
    part, _ = as_partition(part, graph.n, p)
    grow, gcol = part // C, part % C
    n = graph.n
    # expand: column j needed by grid rows {grow[i] : a_ij != 0}; sent to (r', gcol[j])
    j, r = needed_pairs(graph.indptr, graph.indices, grow, R, n)
    off = r != grow[j]
    dst = r[off] * C + gcol[j[off]]
    expand = np.bincount(part[j[off]] * p + dst, minlength=p * p).reshape(p, p).astype(np.int64)
    # fold: row i has partials on grid columns {gcol[j] : a_ij != 0}; (grow[i], c') -> part[i]
    T = graph.transpose()  # rows of A as columns: needed_pairs over A^T groups by row i
    i, cc = needed_pairs(T.indptr, T.indices, gcol, C, n)
    off = cc != gcol[i]
    src = grow[i[off]] * C + cc[off]
    fold = np.bincount(src * p + part[i[off]], minlength=p * p).reshape(p, p).astype(np.int64)
    return stats_2d(expand + fold, R, C, f=f, dtype=dtype, alpha=alpha, beta=beta,
                    stages={"expand": expand, "fold": fold})


def stats_2d(volume: np.ndarray, R: int, C: int, *, f: int = 128, dtype: str = "float32",
             alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE,
             stages: dict | None = None) -> LayoutStats:
    """The 2D figures from the int64[p, p] rows moved by expand + fold (``stages``: the two
    apart, the two exchange steps a topology's α-β time counts one after the other)."""
    p = R * C
    return LayoutStats("2d", p, (R, C), volume, np.zeros(p, dtype=np.int64), f, dtype, alpha, beta,
                       stages=stages)
