"""Generators: exact edge counts (closed formulas), Graph500 tuple count,
determinism, R-MAT degree skew, random geometric graph vs brute-force distances."""
import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform

from partplan.datasets import (GeneratorParameterError, grid2d, grid3d, random_geometric, rmat,
                               rmat_edges)
from partplan.errors import DatasetError


def undirected_edge_set(g):
    """{(u, v) : u < v} from the CSR, with plain Python (oracle side)."""
    out = set()
    for u in range(g.n):
        for v in g.indices[g.indptr[u]:g.indptr[u + 1]].tolist():
            assert u != v, "generator produced a self loop"
            out.add((min(u, v), max(u, v)))
    return out


# ----------------------------------------------------------------- grids
@pytest.mark.parametrize("nx,ny", [(1, 1), (1, 7), (2, 2), (3, 4), (10, 7), (31, 1)])
def test_grid2d_edge_count(nx, ny):
    g = grid2d(nx, ny)
    assert g.n == nx * ny
    assert g.nnz == 2 * (nx * (ny - 1) + ny * (nx - 1))
    assert g.is_symmetric() and not g.has_self_loops()


def test_grid2d_neighbours_by_hand():
    # 3 x 2 grid, vertex x + 3*y:   0 1 2 / 3 4 5
    g = grid2d(3, 2)
    assert undirected_edge_set(g) == {(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (1, 4), (2, 5)}


@pytest.mark.parametrize("nx,ny,expected", [(3, 3, 18), (4, 5, 40), (2, 5, 5 + 10), (1, 4, 4), (2, 2, 4)])
def test_grid2d_periodic_counts(nx, ny, expected):
    # torus: 2*nx*ny when both sides >= 3; a side of 2 adds no wrap edge;
    # a side of 1 has no edges along it
    g = grid2d(nx, ny, periodic=True)
    assert g.nnz // 2 == expected
    assert g.is_symmetric() and not g.has_self_loops()
    if nx >= 3 and ny >= 3:
        assert np.all(g.row_nnz == 4)


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 4), (5, 5, 5), (7, 1, 3)])
def test_grid3d_edge_count(shape):
    nx, ny, nz = shape
    g = grid3d(nx, ny, nz)
    assert g.n == nx * ny * nz
    assert g.nnz // 2 == (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1)
    assert g.row_nnz.max(initial=0) <= 6


def test_grid3d_matches_brute_force_stencil():
    nx, ny, nz = 3, 4, 2
    g, xyz = grid3d(nx, ny, nz, return_coords=True)
    want = set()
    for u in range(g.n):
        for v in range(u + 1, g.n):
            if np.abs(xyz[u] - xyz[v]).sum() == 1:  # Manhattan distance 1 = 7-point stencil
                want.add((u, v))
    assert undirected_edge_set(g) == want
    # vertex id = x + nx*(y + ny*z)
    u = 1 + nx * (2 + ny * 1)
    assert xyz[u].tolist() == [1.0, 2.0, 1.0]


def test_grid3d_periodic_regular():
    g = grid3d(3, 4, 5, periodic=True)
    assert np.all(g.row_nnz == 6) and g.nnz // 2 == 3 * 3 * 4 * 5


# ----------------------------------------------------------------- R-MAT
@pytest.mark.parametrize("scale,ef", [(1, 1), (5, 16), (10, 16), (8, 3)])
def test_rmat_tuple_count_and_range(scale, ef):
    src, dst = rmat_edges(scale, ef, seed=7)
    assert src.size == dst.size == ef * 2 ** scale
    assert src.dtype == np.int64 and dst.dtype == np.int64
    assert src.min() >= 0 and dst.min() >= 0
    assert max(src.max(), dst.max()) < 2 ** scale


def test_rmat_kernel1_keeps_self_loops_and_duplicates():
    src, dst = rmat_edges(6, 16, seed=0)   # 1024 tuples on 64 vertices: collisions certain
    assert np.any(src == dst)
    assert np.unique(src * 64 + dst).size < src.size


def test_rmat_spans_several_blocks():
    # 2**17 * 16 = 2M tuples = 2 random blocks; the range and count must hold across them
    src, dst = rmat_edges(17, 16, seed=3)
    assert src.size == 16 * 2 ** 17 and max(src.max(), dst.max()) < 2 ** 17


def test_rmat_determinism():
    a = rmat(10, seed=5)
    b = rmat(10, seed=5)
    c = rmat(10, seed=6)
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint
    s1, d1 = rmat_edges(9, seed=5)
    s2, d2 = rmat_edges(9, seed=5)
    assert np.array_equal(s1, s2) and np.array_equal(d1, d2)


def test_rmat_graph_is_dedup_symmetric_without_loops():
    src, dst = rmat_edges(8, 8, seed=2, shuffle=False)
    g = rmat(8, 8, seed=2)
    want = {(min(u, v), max(u, v)) for u, v in zip(src.tolist(), dst.tolist()) if u != v}
    assert undirected_edge_set(g) == want
    assert g.n == 256 and not g.directed


def test_rmat_unpermuted_quadrant_frequencies():
    # without permutation the top bit of (row, col) picks the quadrant: frequencies ~ a, b, c, d
    scale, a, b, c = 12, 0.57, 0.19, 0.19
    src, dst = rmat_edges(scale, 16, a, b, c, seed=11, permute=False)
    top = 1 << (scale - 1)
    r, q = src >= top, dst >= top
    m = src.size  # 65536 tuples: binomial std <= 0.002, margins below are > 5 sigma
    assert abs(np.mean(~r & ~q) - a) < 0.012
    assert abs(np.mean(~r & q) - b) < 0.012
    assert abs(np.mean(r & ~q) - c) < 0.012
    assert abs(np.mean(r & q) - (1 - a - b - c)) < 0.012
    assert m == 16 << scale


def test_rmat_degree_skew_vs_uniform():
    scale = 14
    g = rmat(scale, seed=1)
    rng = np.random.default_rng(1)
    n, m = 2 ** scale, 16 * 2 ** scale
    from partplan import Graph
    u = Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n=n, symmetrize=True,
                         self_loops="remove")
    dr, du = g.row_nnz, u.row_nnz
    # uniform random graph: Poisson(~32) degrees, max well under 100; R-MAT: heavy tail
    assert du.max() < 100
    assert dr.max() > 10 * du.max()
    # coefficient of variation: Poisson ~ 0.18, Graph500 R-MAT > 2
    assert dr.std() / dr.mean() > 5 * (du.std() / du.mean())
    # R-MAT leaves many vertices isolated, uniform leaves (almost) none
    assert np.mean(dr == 0) > 0.2 and np.mean(du == 0) < 0.001


@pytest.mark.parametrize("kw", [dict(scale=0), dict(scale=41), dict(scale=4, edgefactor=0),
                                dict(scale=4, a=0.5, b=0.5, c=0.1), dict(scale=4, a=-0.1),
                                dict(scale=4, a=0.0, b=0.0, c=0.5), dict(scale=4, seed=-1),
                                dict(scale=2.5)])
def test_rmat_bad_parameters(kw):
    with pytest.raises(GeneratorParameterError) as ei:
        rmat_edges(**kw)
    assert isinstance(ei.value, DatasetError) and isinstance(ei.value, ValueError)


# ------------------------------------------------------ random geometric
def test_rgg_matches_brute_force_distances():
    g, pts = random_geometric(300, radius=0.09, seed=4, return_coords=True)
    D = squareform(pdist(pts))
    iu, ju = np.nonzero(np.triu(D <= 0.09, k=1))
    want = set(zip(iu.tolist(), ju.tolist()))
    got = undirected_edge_set(g)
    assert got == want
    assert all(D[u, v] <= 0.09 for u, v in got)


def test_rgg_3d_and_radius_from_degree():
    g, pts = random_geometric(2000, avg_degree=12, dim=3, seed=0, return_coords=True)
    assert pts.shape == (2000, 3) and pts.min() >= 0 and pts.max() < 1
    assert 11.2 < g.nnz / g.n < 12.8        # the radius counts the cube's boundary (2,000 points: ±0.3)


@pytest.mark.parametrize("dim", [1, 2, 6, 16])
def test_rgg_mean_degree_is_the_one_asked_for_in_any_dimension(dim):
    """The radius ignored the cube's boundary: 10 asked gave a mean degree of 9.9 in 2D, 6.8 in 6D
    and 0.7 in 16D (an audit). Counted here over four graphs of 3,000 points (one graph's mean
    degree has a standard deviation of about 0.26 in 16D, 0.06 in 2D: the band is 3.5 of the four's)."""
    mean = np.mean([random_geometric(3000, avg_degree=10, dim=dim, seed=s).nnz / 3000 for s in range(4)])
    assert 9.55 < mean < 10.45, mean


def test_rgg_determinism():
    assert random_geometric(500, seed=3).fingerprint == random_geometric(500, seed=3).fingerprint
    assert random_geometric(500, seed=3).fingerprint != random_geometric(500, seed=4).fingerprint


@pytest.mark.parametrize("kw", [dict(n=0), dict(n=10, radius=-1.0), dict(n=10, avg_degree=0),
                                dict(n=10, dim=0), dict(n=10, radius=float("nan"))])
def test_rgg_bad_parameters(kw):
    with pytest.raises(GeneratorParameterError):
        random_geometric(**kw)


def test_grid_bad_parameters():
    with pytest.raises(GeneratorParameterError):
        grid2d(0, 3)
    with pytest.raises(GeneratorParameterError):
        grid3d(2, 2, "3")


# ----------------------------------------------------------------- web crawl
def test_web_crawl_shape_determinism_and_connectivity():
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    from partplan.datasets import web_crawl

    g = web_crawl(3000, seed=3)
    assert g.n == 3000 and g.is_symmetric() and not g.has_self_loops()
    h = web_crawl(3000, seed=3)
    assert np.array_equal(g.indptr, h.indptr) and np.array_equal(g.indices, h.indices)
    assert not np.array_equal(g.indices, web_crawl(3000, seed=4).indices)
    # the crawl tree reaches every page: one connected component (scipy)
    a = csr_matrix((np.ones(g.nnz), g.indices, g.indptr), shape=(g.n, g.n))
    assert connected_components(a, directed=False)[0] == 1


def test_web_crawl_is_hub_heavy_and_directed_view_has_dangling_pages():
    from partplan.datasets import web_crawl

    g = web_crawl(20000, seed=1)
    deg = np.diff(g.indptr)
    # hubs: the largest degree far above the mean, the top 1 % of pages hold a large share of the ends
    assert deg.max() > 50 * deg.mean()
    top = np.sort(deg)[::-1][: g.n // 100]
    assert top.sum() > 0.15 * deg.sum()
    d = web_crawl(20000, seed=1, symmetrize=False)
    out_deg = np.diff(d.indptr)
    in_deg = np.bincount(d.indices, minlength=d.n)
    assert (out_deg == 0).any()                     # crawl frontier: pages without out-links
    assert (in_deg[np.argsort(in_deg)[1:]] >= 1).all()   # every page but the crawl's root is linked
    # symmetrizing the directed graph gives the undirected one (scipy A + A^T)
    from scipy.sparse import csr_matrix
    a = csr_matrix((np.ones(d.nnz), d.indices, d.indptr), shape=(d.n, d.n))
    s = ((a + a.T) > 0).tocsr()
    s.setdiag(0)
    s.eliminate_zeros()
    s.sort_indices()
    assert np.array_equal(s.indptr, g.indptr) and np.array_equal(s.indices, g.indices)


@pytest.mark.parametrize("kw", [dict(n=1), dict(n=100, local=1.5), dict(n=100, in_exponent=1.0),
                                dict(n=100, avg_out=True), dict(n=100, seed=-1)])
def test_web_crawl_bad_parameters(kw):
    from partplan.datasets import web_crawl

    with pytest.raises(GeneratorParameterError):
        web_crawl(**kw)


def test_web_generators_take_their_heaviest_allowed_tails():
    """Exponents inside the accepted range [1.05, 10] raised numpy's errors (a host or section size
    past 2^63 cast to a negative int before it was capped, from an audit): sizes are capped as
    floats. Every page still belongs to one host, and the graph has the asked page count."""
    from partplan.datasets.generators import web_crawl
    from partplan.datasets.generators_web import web_host_crawl
    for g in (web_crawl(100_000, host_exponent=1.2), web_host_crawl(100_000, host_exponent=1.2),
              web_host_crawl(3000, section_exponent=1.05), web_crawl(3000, host_exponent=1.05)):
        assert g.nnz > g.n // 2 and g.indices.min() >= 0 and g.indices.max() < g.n
    assert web_crawl(100_000, host_exponent=1.2).n == 100_000


def test_rmat_default_names_tell_graphs_apart(tmp_path):
    """--abc and --no-permute gave other graphs the default's name (an audit); Graph500's
    parameters keep the name they had, in memory and chunked alike."""
    from partplan.datasets.chunked_gen import rmat_chunked
    from partplan.io.chunked import chunk_info
    names = {rmat(6, seed=1).name, rmat(6, 16, 0.45, 0.15, 0.15, seed=1).name, rmat(6, seed=1, permute=False).name}
    assert len(names) == 3 and "rmat-s6-ef16-seed1" in names
    path = rmat_chunked(6, 16, 0.45, 0.15, 0.15, seed=1, path=tmp_path / "c", chunks=2, permute=False)
    assert chunk_info(path).name == rmat(6, 16, 0.45, 0.15, 0.15, seed=1, permute=False).name


def test_rgg_pair_probability_against_counted_pairs(monkeypatch):
    """The share of pairs a radius joins, boundary counted, against pairs counted over random points
    (2D and 10D), and the size pre-check built on it: a 16-dimensional graph that fits a 12 MB
    budget is made (the ball's volume alone, 14 times too high there, refused it)."""
    from scipy.spatial.distance import pdist

    from partplan.datasets import rgg_pair_probability
    rng = np.random.default_rng(5)
    for dim, r in ((2, 0.1), (10, 0.9)):
        d = pdist(rng.random((3000, dim)))
        assert abs(rgg_pair_probability(r, dim) / np.mean(d <= r) - 1) < 0.03
    assert rgg_pair_probability(2.0, 3) == 1.0 and rgg_pair_probability(0.0, 3) == 0.0
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "12M")
    g = random_geometric(20_000, avg_degree=10, dim=16)
    assert 9 < g.nnz / g.n < 11
