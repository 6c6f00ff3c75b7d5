"""A web-crawl generator with host structure: hosts of heavy-tailed sizes, sections
(directories) inside each host with index pages and navigational near-cliques, most links
inside the host, host home pages as the crawl's hubs, ids in crawl (host) order.

:func:`web_host_crawl` is the variant of :func:`partplan.datasets.generators.web_crawl`
checked against the published statistics of real crawls (SNAP web-NotreDame, web-Stanford,
web-BerkStan, web-Google; docs/design/webcrawl-generator.md); :func:`web_crawl` keeps its
graphs for the benchmarks that use it. Vectorized numpy, deterministic for ``seed``.
"""
from __future__ import annotations

import numpy as np

from ..graph import Graph
from .generators import GeneratorParameterError, _check_int, _draw, _pareto_weights

__all__ = ["web_host_crawl"]


def _check_num(label: str, v, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
        raise GeneratorParameterError(f"{label} must be a number in [{lo:g}, {hi:g}], got {v!r}")
    return float(v)


def _cut(sizes: np.ndarray, n: int) -> np.ndarray:
    """The prefix of ``sizes`` that covers exactly ``n`` (the last one shortened)."""
    ends = np.cumsum(sizes)
    k = int(np.searchsorted(ends, n)) + 1
    out = sizes[:k].copy()
    out[-1] -= int(ends[k - 1]) - n
    return out


def web_host_crawl(n: int, avg_out: float = 3.0, seed: int = 0, *, local: float = 0.85,
                   in_exponent: float = 2.1, out_exponent: float = 2.5, host_exponent: float = 2.0,
                   max_host: float = 0.05, section_exponent: float = 2.2, section_max: float = 0.01,
                   menu: float = 0.3, menu_width: float = 8.0, template: float = 0.1,
                   template_min: int = 40, template_max: int = 150, template_link: float = 0.7,
                   nav: int = 8, nav_link: float = 0.4,
                   home: float = 0.9, up: float = 0.6, frontier: float = 0.6, dangling: float = 0.2,
                   max_share: float = 0.02, symmetrize: bool = True, shuffle: bool = False,
                   return_hosts: bool = False, name: str | None = None):
    """A crawl of ``n`` pages grouped in hosts, the host structure of real crawls.

    Construction (vectorized, deterministic for ``seed``):

    * **hosts**: sizes ⌈Pareto(``host_exponent``)⌉ pages, at most ``max_host · n``; the pages
      of a host are consecutive ids (crawl order; ``shuffle=True`` permutes them);
    * **sections**: each host is cut into sections (directories) of sizes
      ⌈Pareto(``section_exponent``)⌉, at most ``section_max · n``; a section's first page is its
      index page, a host's first page its home page;
    * **structural links** (what a site's navigation gives): the index page links every
      page of its section (the crawl tree inside a section), the home page links every index
      page of its host, each page links back to its index with probability ``up`` and to its
      home page with probability ``home`` (so a home page's in-degree is about ``home`` × its
      host's size: the crawl's largest hubs); inside a section each ordered pair of pages is
      linked with probability ``menu`` · min(1, ``menu_width`` / (section size − 1))
      (navigation menus: near-cliques, the source of the high clustering of crawls); the
      host's first ``nav`` index pages form its navigation bar: linked to each other, and from
      each page of the host with probability ``nav_link``; a host's home page is linked from
      a uniform index page of an earlier host, so the crawl reaches every host;
    * **templates**: a share ``template`` of the sections of at least ``template_min`` pages
      are generated archives (calendars, galleries, mailing-list archives): their first
      ``template_max`` pages link each other with probability ``template_link`` (dense
      near-cliques: most of the crawl's triangles);
    * **content links**: each page draws ⌈Pareto(``out_exponent``)⌉ more links, mean
      ``avg_out`` (none with probability ``dangling``), each with probability ``local`` to a
      page of its own host and else to any page, drawn by a popularity of density exponent
      ``in_exponent`` (capped at ``max_share`` of the total);
    * **the crawl frontier**: a share ``frontier`` of the pages other than index and template
      pages was
      found but not fetched: all their out-links are dropped (pages without out-links, and a
      largest strongly connected component well below the largest weak one, as in crawls);
    * self links and duplicate links are dropped.

    ``symmetrize`` (default True) stores A + Aᵀ; False keeps the directed graph.
    ``return_hosts=True`` returns ``(graph, host)`` with ``host`` int64[n] (the host of each
    page, after ``shuffle``).

    >>> g = web_host_crawl(3000, seed=1)
    >>> g.n, g.is_symmetric(), g.has_self_loops()
    (3000, True, False)
    """
    n = _check_int("n", n, 2)
    avg_out = _check_num("avg_out", avg_out, 0.0, 1e4)
    from .generators import _check_size
    _check_size("n", "web crawl pages and their links (n · (avg_out + 2))", int(n * (avg_out + 2)), 48)
    local = _check_num("local", local, 0.0, 1.0)
    in_exponent = _check_num("in_exponent", in_exponent, 1.05, 10.0)
    out_exponent = _check_num("out_exponent", out_exponent, 2.05, 10.0)
    host_exponent = _check_num("host_exponent", host_exponent, 1.05, 10.0)
    max_host = _check_num("max_host", max_host, 0.0, 1.0)
    section_exponent = _check_num("section_exponent", section_exponent, 1.05, 10.0)
    section_max = _check_num("section_max", section_max, 0.0, 1.0)
    menu = _check_num("menu", menu, 0.0, 1.0)
    menu_width = _check_num("menu_width", menu_width, 1.0, 1e6)
    template = _check_num("template", template, 0.0, 1.0)
    template_min = _check_int("template_min", template_min, 2)
    template_max = _check_int("template_max", template_max, 2)
    template_link = _check_num("template_link", template_link, 0.0, 1.0)
    nav = _check_int("nav", nav, 0)
    nav_link = _check_num("nav_link", nav_link, 0.0, 1.0)
    frontier = _check_num("frontier", frontier, 0.0, 0.99)
    home = _check_num("home", home, 0.0, 1.0)
    up = _check_num("up", up, 0.0, 1.0)
    dangling = _check_num("dangling", dangling, 0.0, 1.0)
    max_share = _check_num("max_share", max_share, 1e-6, 1.0)
    seed = _check_int("seed", seed, 0)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0x77EB])))

    # hosts: heavy-tailed sizes, consecutive pages
    cap = max(1, int(max_host * n))
    # capped as floats: a heavy tail's weight past 2^63 (or inf) would cast to a negative size
    hsize = _cut(np.minimum(np.ceil(_pareto_weights(rng, n, host_exponent)), cap).astype(np.int64), n)
    nh = hsize.size
    hfirst = np.concatenate([[0], np.cumsum(hsize)[:-1]])
    host = np.repeat(np.arange(nh, dtype=np.int64), hsize)
    # sections: heavy-tailed sizes cut at host boundaries
    scap = max(1, int(section_max * n))
    ssz = np.minimum(np.ceil(_pareto_weights(rng, n, section_exponent)), scap).astype(np.int64)
    sstart = np.union1d(np.cumsum(_cut(ssz, n))[:-1], hfirst)          # sorted section starts
    sec = np.searchsorted(sstart, np.arange(n), side="right") - 1
    sec_len = np.diff(np.append(sstart, n))
    idx_page = sstart[sec]                                             # each page's index page
    home_page = hfirst[host]
    page = np.arange(n, dtype=np.int64)
    parts_src, parts_dst = [], []
    # index -> section pages; page -> index (up); page -> home
    member = page != idx_page
    parts_src.append(idx_page[member]); parts_dst.append(page[member])
    b = member & (rng.random(n) < up)
    parts_src.append(page[b]); parts_dst.append(idx_page[b])
    b = (page != home_page) & (rng.random(n) < home)
    parts_src.append(page[b]); parts_dst.append(home_page[b])
    # home -> index pages of its host; a host's home from a uniform earlier page
    is_idx = np.zeros(n, dtype=bool)
    is_idx[sstart] = True
    b = is_idx & (page != home_page)
    parts_src.append(home_page[b]); parts_dst.append(page[b])
    later = hfirst[1:]
    n_before = np.searchsorted(sstart, later)                          # index pages of earlier hosts
    parts_src.append(sstart[(rng.random(later.size) * n_before).astype(np.int64)]); parts_dst.append(later)
    # menus: each page links each other page of its section with probability
    # menu · min(1, menu_width / (s - 1)) (drawn as a binomial count of uniform section-mates;
    # repeats merge); in template sections (a share `template` of the sections of at least
    # `template_min` pages: generated archives, calendars, galleries) the first `template_max`
    # pages link each other with probability `template_link`: dense near-cliques
    others = sec_len[sec] - 1
    p_page = menu * np.minimum(1.0, menu_width / np.maximum(others, 1))
    dense = np.zeros(n, dtype=bool)
    if template > 0:
        tsec = (sec_len >= template_min) & (rng.random(sstart.size) < template)
        pos_all = page - idx_page
        dense = tsec[sec] & (pos_all < template_max)
        others = np.where(dense, np.minimum(others, template_max - 1), others)
        p_page = np.where(dense, template_link, p_page)
    cnt = rng.binomial(others, p_page)
    src = np.repeat(page, cnt)
    if src.size:
        span = others[src]
        pos = (page - idx_page)[src]
        dst = idx_page[src] + (pos + 1 + (rng.random(src.size) * span).astype(np.int64)) % (span + 1)
        parts_src.append(src); parts_dst.append(dst)
    # the host's navigation bar: its first `nav` index pages, linked to each other and, each
    # with probability `nav_link`, from every page of the host
    if nav > 0:
        sec_host = host[sstart]
        first_sec = np.searchsorted(sec_host, np.arange(nh))
        cnt = np.minimum(np.bincount(sec_host, minlength=nh), nav)
        reps = cnt[host]
        src = np.repeat(page, reps)
        off = np.arange(src.size) - np.repeat(np.cumsum(reps) - reps, reps)
        dst = sstart[first_sec[host[src]] + off]
        bar = np.zeros(n, dtype=bool)
        bar[dst] = True
        keep = bar[src] | (rng.random(src.size) < nav_link)
        parts_src.append(src[keep]); parts_dst.append(dst[keep])
    # content links by popularity: host-local with probability `local`, else global
    if avg_out > 0:
        raw = _pareto_weights(rng, n, out_exponent)
        out = np.ceil(raw * (avg_out / raw.mean()) - 0.5).clip(1, n - 1).astype(np.int64)
        out[rng.random(n) < dangling] = 0
        src = np.repeat(page, out)
        m = src.size
        pop = _pareto_weights(rng, n, in_exponent)
        for _ in range(3):
            pop = np.minimum(pop, max_share * pop.sum())
        cum = np.cumsum(pop)
        lo = hfirst[host[src]]
        base = np.where(lo > 0, cum[lo - 1], 0.0)
        span = cum[lo + hsize[host[src]] - 1] - base
        u = rng.random(m)
        is_local = rng.random(m) < local
        dst = np.where(is_local, _draw(cum, base, span, u), _draw(cum, np.zeros(m), np.full(m, cum[-1]), u))
        parts_src.append(src); parts_dst.append(dst)
    src, dst = np.concatenate(parts_src), np.concatenate(parts_dst)
    # the crawl frontier: pages found but not fetched have no out-links (never an index or template page)
    fetched = is_idx | dense | (rng.random(n) >= frontier)
    keep = fetched[src]
    src, dst = src[keep], dst[keep]
    if shuffle:
        relabel = rng.permutation(n)
        src, dst = relabel[src], relabel[dst]
        host = host[np.argsort(relabel)]
    g = Graph.from_edges(src, dst, n=n, symmetrize=symmetrize, self_loops="remove", dedupe=True,
                         name=name or f"web-host-crawl-n{n}-seed{seed}")
    return (g, host) if return_hosts else g
