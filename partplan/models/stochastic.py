"""Stochastic hypergraph model for mini-batch GNN training.

In mini-batch training each step samples a subgraph; rank r computes the
sampled rows it owns and needs ``H[j]`` for every sampled column j of those
rows. The communication of one batch is therefore the column-net volume of the
*sampled* matrix restricted to the rows computed in that batch (one exchange
per layer / hop). The stochastic hypergraph (Demirci, Haldar & Ferhatosmanoglu
style) samples many batches, turns every sampled column of every hop into a
net (pins = rows that aggregate it in that hop, plus its owner j), merges
identical nets into weighted nets, and partitions that: its weighted km1 is
the sum of the sampled batches' volumes, so minimizing it minimizes the
*expected* mini-batch volume.

How many batches: each net's cost λ−1 lies in [0, p−1], so by Hoeffding the
mean cost over |N| independently sampled nets is within θ of its expectation
with probability ≥ 1−δ once ``|N| ≥ (p−1)²/(2θ²) · ln(2/δ)``
(:func:`hoeffding_nets`); batches are drawn until the nets with ≥ 2 pins
(single-pin nets never cost anything) reach that count.

Samplers (all vectorized per batch, numpy only; a sampler is any object with
``sample(graph, rng) -> list[(rows, cols)]`` giving the sampled nonzeros
``a_ij`` of each hop):

- :class:`NeighborSampler`: uniform seed nodes + L-hop neighbour sampling with
  fanouts, without replacement (GraphSAGE / DGL ``sample_neighbors``).
- :class:`SaintNodeSampler`: GraphSAINT node sampler (nodes drawn with
  probability ∝ degree), induced subgraph, the same exchange in every layer.
- :class:`SaintRandomWalkSampler`: GraphSAINT random-walk sampler.

:func:`expected_volume` measures a partition on fresh (held-out) batches.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from .._seed import numpy_seed
from ..errors import OptionError
from ..graph import Graph
from ..hypergraph import Hypergraph
from .graph_model import model_vertex_weights
from .nets import merge_identical_nets
from ..graph import check_graph

Hop = tuple[np.ndarray, np.ndarray]  # (rows i, cols j) of the sampled nonzeros a_ij


class Sampler(Protocol):
    def sample(self, graph: Graph, rng: np.random.Generator) -> list[Hop]: ...


def hoeffding_nets(p: int, theta: float, delta: float) -> int:
    """Nets needed so the sampled mean net cost is θ-close with prob. ≥ 1−δ:
    ``ceil((p−1)² / (2θ²) · ln(2/δ))`` (0 for p = 1)."""
    from .._args import check_int, check_real
    p = check_int("k", p, lo=1)
    theta = check_real("theta", theta, lo=0.0, lo_open=True)
    delta = check_real("delta", delta, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    return int(math.ceil((p - 1) ** 2 / (2.0 * theta * theta) * math.log(2.0 / delta)))


def _segment_rank(seg: np.ndarray, nseg: int, rng: np.random.Generator) -> np.ndarray:
    """Random rank of every element within its segment (seg sorted ascending)."""
    order = np.argsort(seg + rng.random(seg.size), kind="stable")
    counts = np.bincount(seg, minlength=nseg)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(seg.size, dtype=np.int64)
    rank[order] = np.arange(seg.size) - starts[seg[order]]
    return rank


def _gather_rows(graph: Graph, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(seg, cols): the nonzeros of the given rows (seg = index into rows)."""
    starts, ends = graph.indptr[rows], graph.indptr[rows + 1]
    deg = ends - starts
    seg = np.repeat(np.arange(rows.size, dtype=np.int64), deg)
    off = np.arange(seg.size, dtype=np.int64) - np.repeat(np.cumsum(deg) - deg, deg)
    return seg, graph.indices[np.repeat(starts, deg) + off]


def _induced(graph: Graph, nodes: np.ndarray) -> Hop:
    mask = np.zeros(graph.n, dtype=bool)
    mask[nodes] = True
    seg, cols = _gather_rows(graph, nodes)
    keep = mask[cols]
    return nodes[seg[keep]], cols[keep]


@dataclass
class NeighborSampler:
    """Uniform seed nodes + L-hop neighbour sampling (GraphSAGE).

    batch_size : seed (output) nodes per batch, drawn uniformly without
        replacement from ``seeds`` (default: all vertices).
    fanouts : neighbours sampled per node at each hop (−1 = all), hop 1 first.
    Hop l's rows are the frontier (the seeds, then every node reached so far);
    its columns the sampled neighbours (columns of A in that row).
    """

    batch_size: int = 512
    fanouts: Sequence[int] = (10, 5)
    seeds: np.ndarray | None = None
    name: str = "neighbor"

    def sample(self, graph: Graph, rng: np.random.Generator) -> list[Hop]:
        pool = np.arange(graph.n) if self.seeds is None else np.asarray(self.seeds, dtype=np.int64)
        frontier = np.sort(rng.choice(pool, size=min(self.batch_size, pool.size), replace=False))
        hops = []
        for fan in self.fanouts:
            seg, cols = _gather_rows(graph, frontier)
            if fan >= 0:
                keep = _segment_rank(seg, frontier.size, rng) < fan
                seg, cols = seg[keep], cols[keep]
            hops.append((frontier[seg], cols))
            frontier = np.union1d(frontier, cols)
        return hops

    def describe(self) -> dict:
        return {"sampler": self.name, "batch_size": self.batch_size, "fanouts": list(self.fanouts)}


@dataclass
class SaintNodeSampler:
    """GraphSAINT node sampler: ``budget`` draws with probability ∝ row degree
    (with replacement, then deduplicated); the induced subgraph is exchanged
    in each of ``layers`` layers."""

    budget: int = 2000
    layers: int = 2
    name: str = "saint-node"

    def sample(self, graph: Graph, rng: np.random.Generator) -> list[Hop]:
        deg = graph.row_nnz.astype(np.float64) + 1e-12
        nodes = np.unique(rng.choice(graph.n, size=self.budget, replace=True, p=deg / deg.sum()))
        return [_induced(graph, nodes)] * self.layers

    def describe(self) -> dict:
        return {"sampler": self.name, "budget": self.budget, "layers": self.layers}


@dataclass
class SaintRandomWalkSampler:
    """GraphSAINT random-walk sampler: ``roots`` uniform roots, each walks
    ``walk_length`` steps to uniform random neighbours (all walks advance
    together, one vectorized step at a time); induced subgraph of the visited
    nodes, exchanged in each of ``layers`` layers."""

    roots: int = 500
    walk_length: int = 4
    layers: int = 2
    name: str = "saint-rw"

    def sample(self, graph: Graph, rng: np.random.Generator) -> list[Hop]:
        cur = rng.integers(0, graph.n, size=self.roots)
        visited = [cur]
        deg = graph.row_nnz
        for _ in range(self.walk_length):
            d = deg[cur]
            step = graph.indptr[cur] + (rng.random(cur.size) * d).astype(np.int64)
            cur = np.where(d > 0, graph.indices[np.minimum(step, graph.nnz - 1)], cur) if graph.nnz else cur
            visited.append(cur)
        nodes = np.unique(np.concatenate(visited))
        return [_induced(graph, nodes)] * self.layers

    def describe(self) -> dict:
        return {"sampler": self.name, "roots": self.roots, "walk_length": self.walk_length,
                "layers": self.layers}


def make_sampler(spec: str | Sampler | None) -> Sampler:
    """A sampler from a short spec: ``"neighbor:512:10,5"`` (batch size,
    fanouts), ``"saint-node:2000"`` (budget), ``"saint-rw:500:4"`` (roots, walk
    length); None → NeighborSampler(). Objects with ``sample`` pass through."""
    if spec is None:
        return NeighborSampler()
    if not isinstance(spec, str):
        if not hasattr(spec, "sample"):
            raise OptionError("a sampler must have a sample(graph, rng) method")
        return spec
    parts = spec.split(":")
    most = {"neighbor": 3, "saint-node": 2, "saint-rw": 3}
    if parts[0] in most and len(parts) > most[parts[0]]:
        raise OptionError(f"bad sampler spec {spec!r}: {parts[0]} takes at most {most[parts[0]] - 1} field(s) after "
                          f"its name ({':'.join(parts[most[parts[0]]:])!r} is left over)")

    def at_least_1(name, v):
        if v < 1:
            raise OptionError(f"bad sampler spec {spec!r}: {name} must be >= 1, got {v}")
        return v

    try:
        if parts[0] == "neighbor":
            bs = at_least_1("batch size", int(parts[1]) if len(parts) > 1 else 512)
            fan = tuple(int(x) for x in parts[2].split(",")) if len(parts) > 2 else (10, 5)
            if not fan or any(f < 1 and f != -1 for f in fan):
                raise OptionError(f"bad sampler spec {spec!r}: fanouts must be >= 1 (or -1 = all), got {list(fan)}")
            return NeighborSampler(bs, fan)
        if parts[0] == "saint-node":
            return SaintNodeSampler(at_least_1("budget", int(parts[1]) if len(parts) > 1 else 2000))
        if parts[0] == "saint-rw":
            return SaintRandomWalkSampler(at_least_1("roots", int(parts[1]) if len(parts) > 1 else 500),
                                          at_least_1("walk length", int(parts[2]) if len(parts) > 2 else 4))
    except OptionError:
        raise
    except ValueError as exc:       # int() of a token that is no integer
        raise OptionError(f"bad sampler spec {spec!r}: {exc}") from None
    raise OptionError(f"unknown sampler {spec!r}; use neighbor[:B[:f1,f2..]], saint-node[:budget] "
                     f"or saint-rw[:roots[:length]]")


def hop_nets(hop: Hop, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Column nets of one sampled hop: net per sampled column j with pins =
    distinct rows i having a sampled a_ij, plus j itself; single-pin nets are
    dropped. Returns (net_ptr, pins), pins sorted within nets."""
    rows, cols = hop
    cols_all = np.concatenate([cols, np.unique(cols)])
    rows_all = np.concatenate([rows, np.unique(cols)])
    keys = np.unique(cols_all * n + rows_all)
    j, i = keys // n, keys % n
    starts = np.flatnonzero(np.concatenate([[True], j[1:] != j[:-1]]))
    sizes = np.diff(np.concatenate([starts, [j.size]]))
    keep = sizes >= 2
    mask = np.repeat(keep, sizes)
    return np.concatenate([[0], np.cumsum(sizes[keep])]).astype(np.int64), i[mask]


@dataclass
class StochasticModel:
    """The stochastic hypergraph and how it was sampled."""

    hypergraph: Hypergraph
    batches: int
    sampled_nets: int          # nets with ≥ 2 pins drawn (= sum of merged net weights)
    required_nets: int         # Hoeffding bound
    theta: float
    delta: float
    sampler: dict = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"batches": self.batches, "sampled_nets": self.sampled_nets,
                "merged_nets": self.hypergraph.m, "required_nets": self.required_nets,
                "theta": self.theta, "delta": self.delta, "sampler": self.sampler,
                "seconds": self.seconds}


def coverage_batches(graph: Graph, sampler: Sampler, coverage: float) -> int:
    """Batches whose seeds / roots / budget draw ``coverage`` × n vertices in
    expectation (``ceil(coverage · n / per-batch draws)``; 1 for a sampler
    without a known batch size)."""
    per = getattr(sampler, "batch_size", None) or getattr(sampler, "budget", None) or \
        getattr(sampler, "roots", None)
    if not per or coverage <= 0:
        return 1
    return max(1, int(math.ceil(coverage * graph.n / float(per))))


def stochastic_hypergraph(graph: Graph, k: int, sampler: Sampler | str | None = None, *,
                          theta: float = 0.1, delta: float = 0.05, seed: int = 0,
                          min_batches: int | None = None, max_batches: int = 100_000,
                          coverage: float = 3.0,
                          vertex_weights: str = "nnz",
                          progress: Callable[[str], None] | None = None) -> StochasticModel:
    """Sample batches until the Hoeffding bound for ``p = k`` parts is met and
    at least ``min_batches`` are drawn, build the merged weighted column-net
    hypergraph of all sampled hops.

    The Hoeffding bound only controls the *mean* net cost; on a large graph it
    is met after a batch or two, which leaves most vertices in no net and free
    to land anywhere. So ``min_batches`` defaults to :func:`coverage_batches`
    (every vertex drawn ``coverage`` = 3 times in expectation): on email-Enron
    at k = 4 with ``neighbor:512:10,5`` that turns 1.00× into 0.80× the
    full-batch partition's mean batch volume (Hoeffding alone: 3.4× worse).

    theta : tolerated error of the mean net cost (rows of H per net, in
        [0, k−1]); delta : failure probability. vertex_weights: "nnz" (row nnz
    of the full matrix: compute balance) or "unit". Raises ValueError when
    max_batches is reached before the bound (raise max_batches or theta).
    """
    from .._args import check_int
    vw = model_vertex_weights(check_graph(graph), vertex_weights)     # checked before any batch is drawn
    k = check_int("k", k, lo=1)
    if k > graph.n:
        raise OptionError(f"k={k} parts exceed n={graph.n} vertices")
    smp = make_sampler(sampler)
    need = hoeffding_nets(k, theta, delta)
    if not np.any(graph.rows != graph.indices):     # no sampled net has two pins: no batch can meet the bound
        raise OptionError(f"the stochastic model samples the edges between vertices, and {graph.name} has none "
                          f"(only self loops, or no nonzero): partition it with the graph model")
    if min_batches is not None and min_batches > max_batches:
        raise OptionError(f"min_batches={min_batches} is above max_batches={max_batches}")
    if min_batches is None:
        min_batches = min(coverage_batches(graph, smp, coverage), max_batches)
    rng = np.random.default_rng(numpy_seed(seed))
    t0 = time.perf_counter()
    ptrs, pinss = [], []
    total = 0
    b = 0
    while b < min_batches or total < need:
        if b >= max_batches:
            raise OptionError(f"Hoeffding bound needs {need} nets but {max_batches} batches gave {total}; "
                             f"raise max_batches or theta")
        for hop in smp.sample(graph, rng):
            ptr, pins = hop_nets(hop, graph.n)
            ptrs.append(ptr)
            pinss.append(pins)
            total += ptr.size - 1
        b += 1
        if progress and b % 50 == 0:
            progress(f"stochastic model: {b} batches, {total}/{need} nets")
    offs = np.cumsum([0] + [p[-1] for p in ptrs])
    net_ptr = np.concatenate([[0]] + [p[1:] + o for p, o in zip(ptrs, offs[:-1])]).astype(np.int64)
    pins = np.concatenate(pinss) if pinss else np.zeros(0, dtype=np.int64)
    net_ptr, pins, w = merge_identical_nets(net_ptr, pins)
    hg = Hypergraph(graph.n, net_ptr, pins, w, vw, name=graph.name + ":stochastic")
    desc = smp.describe() if hasattr(smp, "describe") else {"sampler": type(smp).__name__}
    return StochasticModel(hg, b, total, need, theta, delta, desc, time.perf_counter() - t0)


def batch_volume(hops: list[Hop], part: np.ndarray, k: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(total, send int64[k], recv int64[k]) rows of H exchanged by one batch:
    Σ over hops of Σ_j (λ_j − 1), λ_j = parts of the rows aggregating j plus
    j's owner."""
    send = np.zeros(k, dtype=np.int64)
    recv = np.zeros(k, dtype=np.int64)
    for rows, cols in hops:
        pairs = np.unique(cols * k + part[rows])
        j, r = pairs // k, pairs % k
        q = part[j]
        off = q != r
        send += np.bincount(q[off], minlength=k)
        recv += np.bincount(r[off], minlength=k)
    return int(send.sum()), send, recv


def expected_volume(graph: Graph, part, sampler: Sampler | str | None = None, *, k: int | None = None,
                    batches: int = 1000, seed: int = 12345) -> dict:
    """Mean mini-batch communication of ``part`` over ``batches`` fresh batches.

    Use a seed different from the one the model was sampled with (held-out
    batches). Returns mean / std / standard error of the per-batch total
    volume (rows of H), the mean per-batch max send and max recv, and the
    per-batch totals (``volumes``).
    """
    check_graph(graph)
    from .._args import check_int
    batches = check_int("batches", batches, lo=1, hi=1 << 24)
    seed = check_int("seed", seed, lo=-(1 << 63), hi=(1 << 63) - 1)
    from ..parts import as_partition

    part, k = as_partition(part, graph.n, k)
    smp = make_sampler(sampler)
    rng = np.random.default_rng(numpy_seed(seed))
    vols = np.empty(batches, dtype=np.int64)
    msend = np.empty(batches, dtype=np.int64)
    mrecv = np.empty(batches, dtype=np.int64)
    for b in range(batches):
        vols[b], s, r = batch_volume(smp.sample(graph, rng), part, k)
        msend[b], mrecv[b] = s.max(), r.max()
    return {"batches": batches, "mean": float(vols.mean()), "std": float(vols.std(ddof=1)) if batches > 1 else 0.0,
            "stderr": float(vols.std(ddof=1) / math.sqrt(batches)) if batches > 1 else 0.0,
            "mean_max_send": float(msend.mean()), "mean_max_recv": float(mrecv.mean()),
            "volumes": vols}
