"""Synthetic graph generators: Graph500 Kronecker / R-MAT, 2D/3D grids, random
geometric graphs, web crawls (hosts, local links, global hubs).

Every generator is vectorized numpy (no Python loop over vertices or edges),
deterministic for a given ``seed`` (numpy ``PCG64`` streams derived with
``SeedSequence``), and returns a :class:`partplan.graph.Graph` whose CSR
canonicalization (sorting, duplicate removal, symmetrization) is done by
``Graph.from_edges`` / scipy.sparse. The neighbour search of the random
geometric graph is scipy's ``cKDTree.query_pairs``.

Unless said otherwise the graphs are undirected (stored symmetric), without
self loops and without duplicate edges; use ``Graph.normalize(self_loops="add")``
for the GCN matrix ``A + I``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import DatasetError
from ..graph import Graph

__all__ = ["GeneratorParameterError", "rmat_edges", "rmat", "grid2d", "grid3d",
           "random_geometric", "web_crawl"]

#: edges drawn per random stream in :func:`rmat_edges`; fixed so that the
#: output for a seed does not depend on memory settings (changing it changes
#: the graphs generated for every seed).
RMAT_CHUNK = 1 << 20


class GeneratorParameterError(DatasetError, ValueError):
    """A generator was called with an invalid parameter (also a ValueError)."""


def _check_int(name: str, value, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise GeneratorParameterError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise GeneratorParameterError(f"{name} must be {rng}, got {value}")
    return value


def _check_size(option: str, what: str, items: int, bytes_per_item: int) -> None:
    """``items`` × ``bytes_per_item`` within the memory budget (:func:`partplan._budget.check_array_bytes`),
    checked before anything is generated: one GeneratorParameterError naming ``option``."""
    from .._budget import check_array_bytes
    from ..errors import OptionError
    try:
        check_array_bytes(items, 1, bytes_per_item, what, option=option)
    except OptionError as exc:
        raise GeneratorParameterError(str(exc)) from None


def _rmat_probs(a: float, b: float, c: float) -> tuple[float, float, float]:
    try:
        a, b, c = float(a), float(b), float(c)
    except (TypeError, ValueError):
        raise GeneratorParameterError(f"R-MAT a, b, c must be numbers, got {a!r}, {b!r}, {c!r}") from None
    d = 1.0 - a - b - c
    if min(a, b, c) < 0 or d < -1e-12 or not all(map(math.isfinite, (a, b, c))):
        raise GeneratorParameterError(
            f"R-MAT probabilities must be >= 0 with a + b + c <= 1, got a={a}, b={b}, c={c} (d={d:.3g})")
    if not 0.0 < a + b < 1.0:
        raise GeneratorParameterError(f"R-MAT needs 0 < a + b < 1, got a + b = {a + b}")
    return a, b, c


def rmat_edges(scale: int, edgefactor: int = 16, a: float = 0.57, b: float = 0.19,
               c: float = 0.19, seed: int = 0, *, permute: bool = True,
               shuffle: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Graph500 Kronecker generator: the raw edge tuples of kernel 1.

    Follows the Graph500 specification (``kronecker_generator.m``): ``N =
    2**scale`` vertices, ``M = edgefactor * N`` tuples; for each of the
    ``scale`` bit levels a tuple takes row bit 1 when ``rand > a + b`` and
    column bit 1 when ``rand > (c / (1 - a - b) if row bit else a / (a + b))``;
    then the vertex labels are randomly permuted and the tuples shuffled.
    Self loops and duplicate tuples are kept (kernel 1 input).

    The random numbers come from numpy PCG64 streams (one per block of
    :data:`RMAT_CHUNK` tuples, seeded by ``SeedSequence([seed, block])``; each
    64-bit draw gives the row and column uniforms of one level at 32-bit
    resolution), not from the reference C generator's MRG, so graphs have the
    same distribution as the reference but not the same edges.

    Parameters
    ----------
    scale : log2 of the number of vertices (1..40).
    edgefactor : tuples per vertex (Graph500: 16).
    a, b, c : quadrant probabilities (d = 1 - a - b - c); Graph500 .57/.19/.19.
    seed : integer seed; same seed, same tuples.
    permute : randomly relabel the vertices (Graph500 does; without it vertex 0
        is the highest-degree vertex).
    shuffle : randomly reorder the tuples.

    Returns
    -------
    (src, dst) : int64[M] each, vertex ids in [0, 2**scale).

    Examples
    --------
    >>> src, dst = rmat_edges(4, seed=1)
    >>> src.size == 16 * 2 ** 4 and int(max(src.max(), dst.max())) < 16
    True
    """
    scale = _check_int("scale", scale, 1, 40)
    edgefactor = _check_int("edgefactor", edgefactor, 1)
    _check_size("edgefactor", "R-MAT edge tuples (edgefactor · 2^scale)", edgefactor << scale, 32)
    seed = _check_int("seed", seed, 0)
    a, b, c = _rmat_probs(a, b, c)
    n = 1 << scale
    m = edgefactor * n
    ab = a + b
    c_norm = c / (1.0 - ab)
    a_norm = a / ab
    # One 64-bit draw per tuple and level gives two 32-bit uniforms u = r / 2**32:
    # "u > p" is "r > floor(p * 2**32)" (resolution 2**-32).
    t_ab, t_c, t_a = (np.uint64(min(int(p * 2.0 ** 32), 2 ** 32 - 1)) for p in (ab, c_norm, a_norm))
    low, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    nblocks = -(-m // RMAT_CHUNK)
    for blk in range(nblocks):  # bounded memory; loop over blocks of tuples, not tuples
        lo, hi = blk * RMAT_CHUNK, min(m, (blk + 1) * RMAT_CHUNK)
        bitgen = np.random.PCG64(np.random.SeedSequence([seed, blk]))
        s, t = src[lo:hi], dst[lo:hi]
        for level in range(scale):
            r = bitgen.random_raw(hi - lo)
            ii = (r & low) > t_ab                      # row bit: rand > a + b
            jj = (r >> shift) > np.where(ii, t_c, t_a)  # column bit, conditional on the row bit
            s |= ii.astype(np.int64) << level
            t |= jj.astype(np.int64) << level
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, nblocks, 1])))
    if permute:
        perm = rng.permutation(n).astype(np.int64)
        src, dst = perm[src], perm[dst]
    if shuffle:
        order = rng.permutation(m)
        src, dst = src[order], dst[order]
    return src, dst


def rmat_name(scale: int, edgefactor: int, a: float, b: float, c: float, seed: int, *, permute: bool) -> str:
    """The default name of an R-MAT graph: scale, edge factor and seed, and the quadrant
    probabilities and the vertex order where they are not Graph500's (two different graphs never
    share a name).

    >>> rmat_name(10, 16, 0.57, 0.19, 0.19, 0, permute=True), rmat_name(10, 16, 0.45, 0.15, 0.15, 0, permute=False)
    ('rmat-s10-ef16-seed0', 'rmat-s10-ef16-seed0-abc0.45,0.15,0.15-unpermuted')
    """
    name = f"rmat-s{scale}-ef{edgefactor}-seed{seed}"
    if (a, b, c) != (0.57, 0.19, 0.19):
        name += f"-abc{a:g},{b:g},{c:g}"
    return name if permute else name + "-unpermuted"


def rmat(scale: int, edgefactor: int = 16, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         seed: int = 0, *, permute: bool = True, symmetrize: bool = True,
         self_loops: str = "remove", drop_isolated: bool = False,
         name: str | None = None) -> Graph:
    """Graph500 Kronecker / R-MAT graph as a :class:`Graph`.

    The tuples of :func:`rmat_edges` are deduplicated (as every Graph500
    kernel-1 implementation does), symmetrized by default (Graph500 graphs are
    undirected), self loops removed by default. All ``2**scale`` vertices are
    kept (R-MAT leaves many isolated) unless ``drop_isolated``; then
    :attr:`Graph.ids` maps rows back to the generator's labels.

    Examples
    --------
    >>> g = rmat(8, seed=0)
    >>> g.n, g.is_symmetric(), g.has_self_loops()
    (256, True, False)
    """
    if self_loops not in ("keep", "add", "remove"):     # before the edges are drawn
        raise GeneratorParameterError(f"self_loops must be 'keep', 'add' or 'remove', not {self_loops!r}")
    src, dst = rmat_edges(scale, edgefactor, a, b, c, seed, permute=permute, shuffle=False)
    name = name or rmat_name(scale, edgefactor, a, b, c, seed, permute=permute)
    return Graph.from_edges(src, dst, n=1 << scale, symmetrize=symmetrize, self_loops=self_loops,
                            dedupe=True, drop_isolated=drop_isolated, name=name)


def _grid_edges(shape: tuple[int, ...], periodic: bool) -> tuple[np.ndarray, np.ndarray]:
    from .._args import check_bool
    periodic = check_bool("periodic", periodic, error=GeneratorParameterError)
    """Undirected stencil edges of a grid, vertex id = x + nx*(y + ny*z)
    (first axis fastest); each edge once (low -> high along an axis)."""
    ids = np.arange(math.prod(shape), dtype=np.int64).reshape(shape[::-1])  # [z, y, x]
    src, dst = [], []
    for ax in range(len(shape)):
        arr_ax = len(shape) - 1 - ax   # numpy axis of grid dimension `ax`
        size = shape[ax]
        if size < 2:
            continue
        if periodic:
            nb = np.roll(ids, -1, axis=arr_ax)
            s, d = ids, nb
            if size == 2:  # wrap edge duplicates the interior edge: keep one copy
                s = np.take(ids, [0], axis=arr_ax)
                d = np.take(ids, [1], axis=arr_ax)
        else:
            s = np.take(ids, np.arange(size - 1), axis=arr_ax)
            d = np.take(ids, np.arange(1, size), axis=arr_ax)
        src.append(s.ravel())
        dst.append(d.ravel())
    if not src:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(src), np.concatenate(dst)


def _grid_coords(shape: tuple[int, ...]) -> np.ndarray:
    axes = np.meshgrid(*[np.arange(s, dtype=np.float64) for s in shape[::-1]], indexing="ij")
    return np.stack([g.ravel() for g in axes[::-1]], axis=1)


def grid2d(nx: int, ny: int, periodic: bool = False, *, return_coords: bool = False,
           name: str | None = None):
    """2D grid graph of the 5-point stencil: ``nx * ny`` vertices, vertex
    ``x + nx*y`` joined to its (up to) 4 axis neighbours.

    Edges (undirected, no self loops): ``nx*(ny-1) + ny*(nx-1)``; with
    ``periodic`` (torus) each axis of length >= 3 gets its wrap-around edges
    (``2*nx*ny`` when both are >= 3); an axis of length 2 has no extra edge.

    Returns the Graph, or ``(graph, coords)`` with ``coords`` float64[n, 2]
    (x, y) when ``return_coords``.

    Examples
    --------
    >>> grid2d(3, 4).nnz // 2   # 3*3 + 4*2
    17
    """
    nx = _check_int("nx", nx, 1)
    ny = _check_int("ny", ny, 1)
    _check_size("nx", "grid vertices (nx · ny)", nx * ny, 96)
    src, dst = _grid_edges((nx, ny), periodic)
    g = Graph.from_edges(src, dst, n=nx * ny, symmetrize=True, self_loops="remove",
                         name=name or f"grid2d-{nx}x{ny}{'-periodic' if periodic else ''}")
    return (g, _grid_coords((nx, ny))) if return_coords else g


def grid3d(nx: int, ny: int, nz: int, periodic: bool = False, *, return_coords: bool = False,
           name: str | None = None):
    """3D grid graph of the 7-point stencil: ``nx*ny*nz`` vertices, vertex
    ``x + nx*(y + ny*z)`` joined to its (up to) 6 axis neighbours.

    Edges (undirected): ``(nx-1)*ny*nz + nx*(ny-1)*nz + nx*ny*(nz-1)``; with
    ``periodic`` every axis of length >= 3 wraps around. Returns the Graph, or
    ``(graph, coords)`` (float64[n, 3]) when ``return_coords``.

    Examples
    --------
    >>> grid3d(2, 3, 4).nnz // 2   # 1*12 + 2*8 + 3*6
    46
    """
    nx = _check_int("nx", nx, 1)
    ny = _check_int("ny", ny, 1)
    nz = _check_int("nz", nz, 1)
    _check_size("nx", "grid vertices (nx · ny · nz)", nx * ny * nz, 128)
    src, dst = _grid_edges((nx, ny, nz), periodic)
    g = Graph.from_edges(src, dst, n=nx * ny * nz, symmetrize=True, self_loops="remove",
                         name=name or f"grid3d-{nx}x{ny}x{nz}{'-periodic' if periodic else ''}")
    return (g, _grid_coords((nx, ny, nz))) if return_coords else g


RGG_MAX_DIM = 16    # the largest dimension of a random geometric graph (its points' coordinates)


def unit_ball_volume(dim: int) -> float:
    """Volume of the unit ball in ``dim`` dimensions, π^(d/2) / Γ(d/2 + 1): a point of a random
    geometric graph has about (n − 1) × this × radius^d neighbours in the unit cube."""
    return math.pi ** (dim / 2) / math.gamma(dim / 2 + 1)


#: points of the fixed Monte Carlo sample :func:`rgg_pair_probability` integrates over (relative error
#: about 0.3 %)
RGG_RADIUS_SAMPLES = 1 << 17


@functools.lru_cache(maxsize=RGG_MAX_DIM)
def _unit_ball_sample(dim: int) -> np.ndarray:
    """A fixed sample of :data:`RGG_RADIUS_SAMPLES` points uniform in the unit ball (read-only)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([dim, 7919])))
    u = rng.standard_normal((RGG_RADIUS_SAMPLES, dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    u *= rng.random(RGG_RADIUS_SAMPLES)[:, None] ** (1.0 / dim)
    u.setflags(write=False)
    return u


def rgg_pair_probability(radius: float, dim: int = 2) -> float:
    """P(|X − Y| ≤ radius) for X, Y uniform in the unit cube ``[0, 1)**dim``: the share of pairs a
    random geometric graph of that radius joins (a point's expected degree is n − 1 times this).
    X − Y has the density Π(1 − |t_i|) on [−1, 1]^dim, so the probability is
    V_dim r^dim × E[Π(1 − |t_i|)⁺] over t uniform in the ball of radius r (``V_dim`` the unit ball's
    volume), the mean taken over a fixed sample (the same value on every call). The cube's
    boundary is counted: in 16 dimensions the ball's volume alone is 14 times too high."""
    dim = _check_int("dim", dim, 1, RGG_MAX_DIM)
    r = float(radius)
    if r <= 0:
        return 0.0
    if r >= math.sqrt(dim):                     # the cube's diagonal: every pair
        return 1.0
    u = _unit_ball_sample(dim)
    return min(1.0, unit_ball_volume(dim) * r ** dim
               * float(np.prod(np.clip(1.0 - np.abs(u * r), 0.0, None), axis=1).mean()))


def rgg_radius(n: int, avg_degree: float, dim: int = 2) -> float:
    """Radius giving an expected degree ``avg_degree`` for ``n`` uniform points in the unit cube,
    boundary effects included: (n − 1) × :func:`rgg_pair_probability` (r) = ``avg_degree``, r found by
    bisection. ``avg_degree`` ≥ n − 1 gives √dim (every pair)."""
    n = _check_int("n", n, 1)
    dim = _check_int("dim", dim, 1, RGG_MAX_DIM)
    if isinstance(avg_degree, bool) or not isinstance(avg_degree, (int, float, np.integer, np.floating)) or not (
            math.isfinite(avg_degree) and avg_degree > 0):
        raise GeneratorParameterError(f"avg_degree must be a positive number, got {avg_degree!r}")
    if n == 1 or avg_degree >= n - 1:
        return math.sqrt(dim)
    target = float(avg_degree) / (n - 1)          # P(|X - Y| <= r) to reach
    lo, hi = 0.0, min(math.sqrt(dim), (target / unit_ball_volume(dim)) ** (1.0 / dim) * 4.0 + 1e-300)
    while rgg_pair_probability(hi, dim) < target and hi < math.sqrt(dim):
        hi = min(math.sqrt(dim), 2.0 * hi)
    for _ in range(50):                             # the probability is increasing in r
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rgg_pair_probability(mid, dim) < target else (lo, mid)
    return hi


def random_geometric(n: int, radius: float | None = None, avg_degree: float = 10.0, dim: int = 2,
                     seed: int = 0, *, return_coords: bool = False, name: str | None = None):
    """Random geometric graph: ``n`` points uniform in ``[0, 1)**dim``, an edge
    between every pair at Euclidean distance ``<= radius`` (scipy
    ``cKDTree.query_pairs``).

    ``radius`` defaults to :func:`rgg_radius` ``(n, avg_degree, dim)``. (The
    DIMACS10 ``rgg_n_2_s`` graphs use ``radius = 0.55 * sqrt(ln n / n)`` in 2D.)
    Vertices are numbered in generation order (random, no spatial locality).
    Returns the Graph, or ``(graph, coords)`` with ``coords`` float64[n, dim].

    Examples
    --------
    >>> g, xy = random_geometric(200, radius=0.1, seed=3, return_coords=True)
    >>> g.n, xy.shape
    (200, (200, 2))
    """
    n = _check_int("n", n, 1)
    dim = _check_int("dim", dim, 1, RGG_MAX_DIM)
    seed = _check_int("seed", seed, 0)
    _check_size("n", "random geometric points", n, 8 * dim + 64)
    if radius is None:
        radius = rgg_radius(n, avg_degree, dim)     # checks avg_degree
    elif (isinstance(radius, bool) or not isinstance(radius, (int, float, np.integer, np.floating))
          or not math.isfinite(radius) or radius < 0):
        raise GeneratorParameterError(f"radius must be a non-negative number, got {radius!r}")
    # the pairs a radius gives in the unit cube: about 16 bytes each in the search, 16 more in the graph
    deg = (n - 1.0) * rgg_pair_probability(radius, dim)
    _check_size("radius / avg_degree", "random geometric pairs", int(n * deg / 2) + 1, 32)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed])))
    pts = rng.random((n, dim))
    from scipy.spatial import cKDTree   # here: importing scipy.spatial costs every command 0.15 s
    pairs = cKDTree(pts).query_pairs(float(radius), output_type="ndarray").astype(np.int64)
    g = Graph.from_edges(pairs[:, 0], pairs[:, 1], n=n, symmetrize=True, self_loops="remove",
                         name=name or f"rgg-n{n}-d{dim}-seed{seed}")
    return (g, pts) if return_coords else g


def _pareto_weights(rng: np.random.Generator, size: int, exponent: float) -> np.ndarray:
    """Weights w ≥ 1 with P(w > x) = x^-(exponent - 1): a power-law density of ``exponent``."""
    return (1.0 - rng.random(size)) ** (-1.0 / (exponent - 1.0))


def _draw(cum: np.ndarray, lo: np.ndarray, span: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices i with cum[i-1] <= lo + u·span < cum[i] (inverse-CDF sampling on a cumulative array)."""
    return np.minimum(np.searchsorted(cum, lo + u * span, side="right"), cum.size - 1)


def web_crawl(n: int, avg_out: float = 4.0, seed: int = 0, *, local: float = 0.75, in_exponent: float = 2.1,
              out_exponent: float = 2.4, host_exponent: float = 1.6, dangling: float = 0.2,
              max_share: float = 0.02, symmetrize: bool = True, name: str | None = None) -> Graph:
    """A web-crawl-like directed graph of ``n`` pages: hub-heavy, with host locality.

    The structure measured on web crawls (Broder et al., "Graph structure in the web", 2000;
    Barabási-Albert's web-NotreDame crawl): in-degrees follow a power law of density exponent
    ``in_exponent`` (~2.1: a few pages are linked from a large share of all pages), out-degrees one
    of ``out_exponent`` (~2.4), most links stay on the page's own host, and a share of the crawled
    pages has no out-link (the crawl frontier). Every page was found through a link: each has one
    from the crawl tree (an earlier page of its host, or an earlier page anywhere for a host's first).

    Construction (vectorized, deterministic for ``seed``):

    * hosts: sizes drawn from a power law of density ``host_exponent`` (pages ≥ 1), pages of a
      host consecutive before the final random relabelling;
    * each page gets an out-degree ⌈Pareto(``out_exponent``) · scale⌉ (mean ``avg_out`` over the
      pages that have links), and with probability ``dangling`` none;
    * each page has a popularity drawn from a power law of density ``in_exponent``, at most
      ``max_share`` of the total (the largest hub of web-NotreDame, 325,729 pages, has 0.7 % of
      its 1.5 M links); each link goes,
      with probability ``local``, to a page of its own host drawn by popularity (a host's home
      and menu pages collect its links), else to any page drawn by popularity (the global hubs);
    * the crawl tree: page i > 0 is linked from a uniform earlier page of its host, a host's first
      page from a uniform earlier page; these links come on top of the out-degrees above;
    * self links and duplicate links are dropped; page ids are randomly permuted.

    ``symmetrize`` (default True) stores A + Aᵀ (the partitioner's undirected view, as the
    benchmarks use it); False keeps the directed graph (pages without out-links are empty rows).

    >>> g = web_crawl(2000, seed=1)
    >>> g.n, g.is_symmetric(), g.has_self_loops()
    (2000, True, False)
    """
    n = _check_int("n", n, 2)
    for label, v, lo, hi in (("avg_out", avg_out, 1.0, 1e4), ("local", local, 0.0, 1.0),
                             ("dangling", dangling, 0.0, 0.99), ("max_share", max_share, 1e-6, 1.0),
                             ("in_exponent", in_exponent, 1.05, 10.0),
                             ("out_exponent", out_exponent, 2.05, 10.0), ("host_exponent", host_exponent, 1.05, 10.0)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
            raise GeneratorParameterError(f"{label} must be a number in [{lo:g}, {hi:g}], got {v!r}")
    _check_size("n", "web crawl pages and their links (n · (avg_out + 2))", int(n * (avg_out + 2)), 48)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(_check_int("seed", seed, 0))))
    # hosts: power-law sizes, at most n pages in all; page -> host, consecutive
    sizes = np.minimum(np.ceil(_pareto_weights(rng, n, host_exponent)), n).astype(np.int64)   # capped as floats:
    # a heavy tail's weight past 2^63 (or inf) would cast to a negative size
    ends = np.cumsum(sizes)
    nh = int(np.searchsorted(ends, n)) + 1
    sizes = sizes[:nh]
    sizes[-1] -= int(ends[nh - 1]) - n
    host = np.repeat(np.arange(nh), sizes)
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    # out-degrees: Pareto of density out_exponent, mean avg_out over the linking pages
    raw = _pareto_weights(rng, n, out_exponent)
    out = np.ceil(raw * (avg_out / raw.mean()) - 0.5).clip(1, n - 1).astype(np.int64)
    out[rng.random(n) < dangling] = 0
    src = np.repeat(np.arange(n), out)
    m = src.size
    # popularity: global cumulative weights (pages of a host consecutive, so a host's is a slice)
    pop = _pareto_weights(rng, n, in_exponent)
    for _ in range(3):      # the cap lowers the total: a few rounds settle it
        pop = np.minimum(pop, max_share * pop.sum())
    cum = np.cumsum(pop)
    lo_page = first[host[src]]
    base = np.where(lo_page > 0, cum[lo_page - 1], 0.0)
    span_local = cum[lo_page + sizes[host[src]] - 1] - base
    is_local = rng.random(m) < local
    u = rng.random(m)
    dst = np.where(is_local, _draw(cum, base, span_local, u), _draw(cum, np.zeros(m), np.full(m, cum[-1]), u))
    # the crawl tree: every page but page 0 has an in-link from an earlier page (its host's, else any)
    page = np.arange(1, n)
    lo_tree = first[host[page]]
    own = page > lo_tree
    back = rng.random(n - 1)
    parent = np.where(own, lo_tree + (back * (page - lo_tree)).astype(np.int64), (back * page).astype(np.int64))
    src, dst = np.concatenate([src, parent]), np.concatenate([dst, page])
    relabel = rng.permutation(n)
    name = name or f"web-crawl-n{n}-seed{seed}"
    return Graph.from_edges(relabel[src], relabel[dst], n=n, symmetrize=symmetrize, self_loops="remove",
                            dedupe=True, name=name)
