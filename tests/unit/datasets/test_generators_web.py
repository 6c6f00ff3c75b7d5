"""web_host_crawl: host structure of real crawls (intra-host share, in-degree tail, crawl
order, frontier), determinism by seed, parameter checks."""
import numpy as np
import pytest

from partplan.datasets import GeneratorParameterError, web_host_crawl


def _tail_exponent(d, dmin):
    x = d[d >= dmin].astype(float)
    return 1.0 + x.size / np.log(x / (dmin - 0.5)).sum()


def test_shape_and_determinism_by_seed():
    g = web_host_crawl(4000, seed=3)
    assert g.n == 4000 and g.is_symmetric() and not g.has_self_loops()
    h = web_host_crawl(4000, seed=3)
    assert np.array_equal(g.indptr, h.indptr) and np.array_equal(g.indices, h.indices)
    assert not np.array_equal(g.indices, web_host_crawl(4000, seed=4).indices)


def test_host_structure_and_crawl_order():
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    d, host = web_host_crawl(30000, seed=1, symmetrize=False, return_hosts=True)
    src = np.repeat(np.arange(d.n), np.diff(d.indptr))
    dst = d.indices
    # most links stay in their host (published: 75-90 % and more in crawls of one domain)
    share = (host[src] == host[dst]).mean()
    assert 0.8 < share < 0.98
    # crawl order: pages of a host are consecutive ids
    assert (np.diff(host) >= 0).all() and np.bincount(host).max() > 20 * np.bincount(host).mean()
    # in-degree tail: a few hubs, exponent near the published 2.1
    ind = np.bincount(dst, minlength=d.n)
    assert ind.max() > 100 * ind.mean()
    assert 1.8 < _tail_exponent(ind, 30) < 2.6
    # the frontier: many pages without out-links; the crawl still reaches every page
    outd = np.diff(d.indptr)
    assert 0.25 < (outd == 0).mean() < 0.7
    a = csr_matrix((np.ones(d.nnz), d.indices, d.indptr), shape=(d.n, d.n))
    assert connected_components(a, directed=True, connection="weak")[0] == 1
    nscc, lab = connected_components(a, directed=True, connection="strong")
    assert np.bincount(lab).max() < 0.7 * d.n
    # navigation near-cliques: clustering far above a random graph of the same density
    s = ((a + a.T) > 0).astype(np.int64).tocsr()
    s.setdiag(0)
    s.eliminate_zeros()
    vs = np.random.default_rng(0).choice(d.n, 2000, replace=False)
    sub = s[vs]
    tri = np.asarray((sub @ s).multiply(sub).sum(axis=1)).ravel() / 2
    deg = np.diff(s.indptr)[vs].astype(float)
    cc = np.where(deg >= 2, tri / np.maximum(deg * (deg - 1) / 2, 1), 0.0).mean()
    assert cc > 0.15


def test_shuffle_keeps_the_graph_up_to_relabelling():
    g, hg = web_host_crawl(3000, seed=2, return_hosts=True)
    s, hs = web_host_crawl(3000, seed=2, shuffle=True, return_hosts=True)
    assert g.nnz == s.nnz
    assert sorted(np.bincount(hg).tolist()) == sorted(np.bincount(hs).tolist())
    assert (np.diff(hs) < 0).any()


@pytest.mark.parametrize("kw", [dict(n=1), dict(n=100, local=1.5), dict(n=100, in_exponent=1.0),
                                dict(n=100, avg_out=True), dict(n=100, seed=-1), dict(n=100, nav=-1),
                                dict(n=100, frontier=1.0)])
def test_bad_parameters(kw):
    with pytest.raises(GeneratorParameterError):
        web_host_crawl(**kw)
