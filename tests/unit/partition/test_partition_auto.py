"""The default pipeline (partition(graph, k) with no options, pipeline.py):
best start per graph, exact figures, ε-balance, determinism, progress lines."""
import numpy as np
import pytest

pytest.importorskip("kaminpar")

from partplan import analyze  # noqa: E402
from partplan.errors import BackendUnavailableError, OptionError  # noqa: E402
from partplan.graph import Graph  # noqa: E402
from partplan.partition.api import partition  # noqa: E402
from partplan.partition.pipeline.auto import auto_partition, figures  # noqa: E402


def _graph(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    from scipy.spatial import cKDTree
    _, nb = cKDTree(pts).query(pts, 7)
    src = np.concatenate([np.repeat(np.arange(n), 6), rng.integers(0, n, n // 10)])
    dst = np.concatenate([nb[:, 1:].ravel(), rng.integers(0, n, n // 10)])
    return Graph.from_edges(src, dst, n=n, symmetrize=True, self_loops="remove", name="geo")


def test_default_is_the_pipeline_and_figures_are_exact():
    g = _graph()
    p = partition(g, 8)
    assert p.params["preset"] == "auto" and p.objective == "max-both" and p.backend in ("metis", "kaminpar",
                                                                                         "mtkahypar")
    s = analyze(g, p.part, 8)
    after = p.info["auto"]["cluster_volume"]["after"]      # the last stage: the final figures
    assert after["total_volume"] == s.total_volume
    assert after["max_send_recv"] == max(int(s.volume.sum(1).max()), int(s.volume.sum(0).max()))
    assert after["max_send_recv"] <= p.info["refine"]["after"]["max_send_recv"]
    # every start gets the km1 V-cycle; the balanced start of lowest max(send, recv) after it is
    # refined first (on this small graph every balanced start is refined and the best result
    # kept); refinement never makes it worse
    starts = p.info["auto"]["starts"]
    low = min(r["figures"]["max_send_recv"] for r in starts if r["balanced"])
    first = [r["engine"] for r in starts if r["balanced"] and r["figures"]["max_send_recv"] == low][0]
    assert p.info["auto"]["refined_starts"][0] == first
    assert set(p.info["auto"]["refined_starts"]) == {r["engine"] for r in starts if r["balanced"]}
    assert p.info["auto"]["chosen"] in p.info["auto"]["refined_starts"]
    assert after["max_send_recv"] <= low
    assert all("vcycle_s" in r for r in starts)
    # total volume within (1 + tolerance) x the lowest start's (recomputed by analyze above)
    chosen = [r for r in starts if r["engine"] == p.info["auto"]["chosen"]][0]
    low = min(r["figures"]["total_volume"] for r in starts)
    assert s.total_volume <= max(chosen["figures"]["total_volume"], int(low * 1.03))
    w = np.maximum(g.row_nnz, 1)
    assert np.bincount(p.part, weights=w).max() <= np.floor(1.03 * np.ceil(w.sum() / 8))


def test_deterministic_for_a_seed():
    g = _graph(800)
    a, ra = auto_partition(g, 4, seed=5)
    b, rb = auto_partition(g, 4, seed=5)
    assert np.array_equal(a, b)
    assert figures(g, a, 4)["max_send_recv"] == ra["cluster_volume"]["after"]["max_send_recv"]


@pytest.mark.parametrize("kw", [{}, {"model": "graph"}, {"backend": "kahypar"}, {"preset": "quality"}])
def test_any_integer_seed_reaches_the_engines(kw):
    """METIS, Mt-KaHyPar and KaHyPar take a C int seed: a seed outside it (--seed 2^40) used to end
    in a TypeError from the binding. Now every path runs (deterministically, but for the quality
    preset: Mt-KaHyPar QUALITY is not)."""
    g = _graph(300)                        # small: the default pipeline also starts Mt-KaHyPar
    for seed in (2 ** 40 + 3, 2 ** 70 + 3, -(2 ** 40) + 3):
        a = partition(g, 4, seed=seed, stats=False, **kw)
        assert a.part.shape == (300,) and a.part.min() >= 0 and a.part.max() < 4
        if kw.get("preset") != "quality":
            assert np.array_equal(a.part, partition(g, 4, seed=seed, stats=False, **kw).part)


def test_engine_seed_is_the_low_31_bits_outside_the_c_range():
    """Each engine gets the seed's low 31 bits (the same partition as that seed); seeds within
    the C int range pass unchanged."""
    from partplan.partition import engines as be
    from partplan.partition.options import engine_seed
    g = _graph(300)
    assert engine_seed(-5) == -5 and engine_seed(2 ** 31 - 1) == 2 ** 31 - 1 and engine_seed(2 ** 31) == 0
    for seed in (2 ** 40 + 3, 2 ** 70 + 3, -(2 ** 40) + 3):
        assert engine_seed(seed) == seed % 2 ** 31 == 3
        assert np.array_equal(be.metis(g, 4, seed=seed), be.metis(g, 4, seed=3))
        assert np.array_equal(be.mtkahypar_graph(g, 4, seed=seed, preset="DETERMINISTIC", threads=1)[0],
                              be.mtkahypar_graph(g, 4, seed=3, preset="DETERMINISTIC", threads=1)[0])


def test_default_budget_is_counted_work_not_seconds(monkeypatch):
    """The default refinement budget is work units (refine's work_limit), so a machine ten times
    slower gets the same partition: a progress callable that sleeps after every line leaves the
    result unchanged, with the budget binding (shrunk here so that it does: a larger budget
    spends more) and the figures exact."""
    import time as _t

    from partplan.partition.pipeline import auto as pipeline

    g = _graph(2000, seed=7)
    monkeypatch.setattr(pipeline, "REFINE_WORK_MIN", 1)
    monkeypatch.setattr(pipeline, "ROUNDS_WORK_MIN", 1)
    fast, rf = auto_partition(g, 8, refine_work=0.5, rounds_work=0.5)
    slow, rs = auto_partition(g, 8, refine_work=0.5, rounds_work=0.5, progress=lambda m: _t.sleep(0.01))
    assert np.array_equal(fast, slow)
    first = int(0.5 * (g.nnz + g.n))
    assert rf["refine"]["work"] == rs["refine"]["work"] > first // 2
    assert figures(g, fast, 8)["max_send_recv"] == rf["cluster_volume"]["after"]["max_send_recv"]
    unlimited, ru = auto_partition(g, 8, refine_rounds=1, refine_work=1e6)
    assert ru["refine"]["work"] > first        # the small budget did bind above
    with pytest.raises(OptionError, match="refine_work"):
        auto_partition(g, 8, refine_work=-1.0)
    with pytest.raises(OptionError, match="time_limit"):
        auto_partition(g, 8, time_limit=float("nan"))


def test_volume_round_gives_back_volume_and_keeps_the_bottleneck():
    """The last stage (volume_work units per pin, 0: off) lowers the total volume of the refined
    partition without raising max(send, recv): both recounted by analyze against the same
    pipeline without it (one cycle: refine_cycles=1; the cycles are tested below); ε-balance holds."""
    for n, seed, k in ((2000, 7, 8), (1500, 3, 16)):
        g = _graph(n, seed=seed)
        without, r0 = auto_partition(g, k, volume_work=0)
        assert "volume_round" not in r0
        with_, r1 = auto_partition(g, k, refine_cycles=1)
        s0, s1 = analyze(g, without, k), analyze(g, with_, k)
        assert max(s1.max_send, s1.max_recv) <= max(s0.max_send, s0.max_recv)
        assert s1.total_volume < s0.total_volume
        assert r1["cluster_volume"]["after"]["total_volume"] == s1.total_volume
        assert all(r1["cluster_volume"]["before"][key] == r1["volume_round"]["after"][key]
                   for key in ("total_volume", "max_send_recv"))
        assert r1["volume_round"]["before"]["total_volume"] == s0.total_volume
        w = np.maximum(g.row_nnz, 1)
        assert np.bincount(with_, weights=w).max() <= np.floor(1.03 * np.ceil(w.sum() / k))
    with pytest.raises(OptionError, match="volume_work"):
        auto_partition(g, 8, volume_work=-1.0)


def test_cluster_volume_rounds_lower_the_volume_under_the_same_bottleneck(monkeypatch):
    """The stage after the cycles moves whole clusters where that lowers the total volume and a
    volume round follows: against the same pipeline without it (recounted by analyze), the total
    volume never rises and falls on some graph, max(send, recv) never rises, ε-balance holds, and
    on a directed graph with empty rows the compute limit holds too."""
    from partplan.partition.pipeline import auto as pipeline

    cases = [(_graph(2000, seed=7), 8), (_graph(1500, seed=3), 16)]
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 1000, 5000), rng.integers(0, 1200, 5000)     # rows 1000..: read, no nonzero
    d = Graph.from_edges(src, dst, n=1200, self_loops="remove", name="dir")
    assert (d.row_nnz[1000:] == 0).all() and np.isin(np.arange(1000, 1200), d.indices).sum() > 150
    cases.append((d, 8))
    lower = 0
    for g, k in cases:
        with_, rep = auto_partition(g, k)
        monkeypatch.setattr(pipeline, "CLUSTER_VOLUME_ROUNDS", 0)
        without, _ = auto_partition(g, k)
        monkeypatch.undo()
        s0, s1 = analyze(g, without, k), analyze(g, with_, k)
        assert max(s1.max_send, s1.max_recv) <= max(s0.max_send, s0.max_recv)
        assert s1.total_volume <= s0.total_volume
        lower += s1.total_volume < s0.total_volume
        assert rep["cluster_volume"]["before"]["total_volume"] == s0.total_volume
        w = np.maximum(g.row_nnz, 1)
        assert np.bincount(with_, weights=w).max() <= np.floor(1.03 * np.ceil(w.sum() / k))
        if np.any(g.row_nnz == 0):
            nnz = g.row_nnz.astype(np.int64)
            assert np.bincount(with_, weights=nnz, minlength=k).max() <= np.floor(1.03 * np.ceil(nnz.sum() / k))
    assert lower >= 1


def test_progress_line_per_refinement_pass():
    g = _graph(800)
    lines = []
    p = partition(g, 4, progress=lines.append)
    # pass lines after each "refining ... of the X start" line; several starts refined side by side
    # (lanes.py) say "X start: refine pass ..."
    segments, cur = {}, None
    for m in lines:
        if m.startswith("refining max(send, recv) of the "):
            cur = m.split(" of the ")[1].split(" start")[0]
            segments[cur] = []
        elif m.startswith("refinement round "):   # rounds 2.. refine the best start's result
            cur = p.info["auto"]["chosen"]
        elif m.startswith("refine pass ") and cur is not None:
            segments[cur].append(m)
        elif " start: refine pass " in m:
            segments[m.split(" start: ")[0]].append(m)
    assert list(segments) == p.info["auto"]["refined_starts"]
    # the chosen start's passes: its first round's and every later round's (refine report: the sum)
    assert len(segments[p.info["auto"]["chosen"]]) == p.info["refine"]["passes"] >= 1
    quiet = partition(g, 4)  # no progress callable: nothing printed, same result
    assert np.array_equal(quiet.part, p.part)


def test_explicit_paths_unchanged_and_bad_options():
    g = _graph(600)
    assert partition(g, 4, objective="total").backend == "mtkahypar"
    assert partition(g, 4, model="graph").backend == "metis"
    with pytest.raises(BackendUnavailableError):
        partition(g, 4, model="graph", starts="metis")
    with pytest.raises(OptionError):
        partition(g, 4, starts="kahypar")
    with pytest.raises(BackendUnavailableError):
        partition(g, 4, preset="auto", backend="mtkahypar")


def test_pipeline_options_are_used_or_refused():
    g = _graph(600)
    p = partition(g, 4, preset="auto", refine=False)
    assert p.info["refine"] is None
    with pytest.raises(BackendUnavailableError):
        partition(g, 4, preset="auto", handoff="file")


def test_starts_by_size(monkeypatch):
    from partplan.partition.pipeline import auto as pipeline

    g = _graph(600)
    assert pipeline.starts_by_size(g)[0] == ("metis", "kaminpar", "mtkahypar")
    monkeypatch.setattr(pipeline, "SMALL_NNZ", 0)
    assert pipeline.starts_by_size(g) == (("metis", "kaminpar"), {})
    monkeypatch.setattr(pipeline, "METIS_MAX_NNZ", 0)
    assert pipeline.starts_by_size(g) == (("kaminpar",), {})
    monkeypatch.setattr(pipeline, "TERAPART_NNZ", 0)
    starts, opts = pipeline.starts_by_size(g)
    assert starts == ("kaminpar",) and opts["kaminpar"]["context"] == "terapart"
    part, rep = auto_partition(g, 4)   # KaMinPar terapart only, figures exact
    assert [r["engine"] for r in rep["starts"]] == ["kaminpar"]
    assert figures(g, part, 4)["max_send_recv"] == rep["refine"]["after"]["max_send_recv"]


def test_no_balanced_start_keeps_the_least_overloaded():
    """A row heavier than the ε-limit: no start can be balanced; the kept one has the lightest
    heaviest part (then refinement does not make it heavier)."""
    from partplan.partition.pipeline.auto import overload

    base = _graph(400)
    n = base.n
    hub = np.zeros(n - 1, dtype=np.int64)
    src = np.concatenate([np.repeat(np.arange(n), np.diff(base.indptr)), hub])
    dst = np.concatenate([base.indices, np.arange(1, n)])
    g = Graph.from_edges(src, dst, n=n, symmetrize=True, self_loops="remove", name="hubby")
    w = np.maximum(g.row_nnz, 1)
    assert w.max() > np.floor(1.03 * np.ceil(w.sum() / 16))
    part, rep = auto_partition(g, 16)
    loads = [r["overload"] for r in rep["starts"]]
    assert min(loads) > 0 and not any(r["balanced"] for r in rep["starts"])
    chosen = [r for r in rep["starts"] if r["engine"] == rep["chosen"]][0]
    assert chosen["overload"] == min(loads)
    assert overload(g, part, 16, 0.03) <= chosen["overload"]


def test_bad_pipeline_options_refused_before_any_engine_runs(monkeypatch):
    from partplan.partition.pipeline import auto as pipeline

    def engine_must_not_run(*a, **kw):
        raise AssertionError("an engine ran before the options were checked")
    monkeypatch.setattr(pipeline, "run_backend", engine_must_not_run)
    g = _graph(300)
    for kw in (dict(select="bogus"), dict(vcycle="sometimes"), dict(starts="kahypar"), dict(refine_rounds=0),
               dict(refine_rounds=2.5)):
        with pytest.raises(OptionError):
            auto_partition(g, 4, **kw)


def test_refinement_rounds_never_worse_exact_and_within_the_first_rounds_limits():
    """Rounds restart the refinement from its result with the next seed: the kept result is the
    lowest round, recounted independently (analyze), within the first round's volume limit and the
    ε-limit, and the rounds end after ROUND_PATIENCE rounds in a row without a lower max."""
    from partplan.partition.pipeline.auto import ROUND_PATIENCE

    g = _graph(1500, seed=3)
    one, r1 = auto_partition(g, 8, refine_rounds=1, volume_work=0)     # the rounds alone
    many, r8 = auto_partition(g, 8, refine_rounds=8, volume_work=0)
    f1, f8 = r1["refine"], r8["refine"]
    assert f1["rounds"] == [f1["after"]["max_send_recv"]]
    assert f8["rounds"][0] == f1["after"]["max_send_recv"] and f8["before"] == f1["before"]
    assert 2 <= len(f8["rounds"]) <= 8
    s = analyze(g, many, 8)
    got = max(int(s.volume.sum(1).max()), int(s.volume.sum(0).max()))
    assert got == f8["after"]["max_send_recv"] == min(f8["rounds"]) <= f1["after"]["max_send_recv"]
    assert s.total_volume == f8["after"]["total_volume"]
    if len(f8["rounds"]) < 8:   # ended by patience: the last rounds found no lower max
        assert min(f8["rounds"][-ROUND_PATIENCE:]) >= min(f8["rounds"][:-ROUND_PATIENCE])
    starts = r8["starts"]
    chosen = [r for r in starts if r["engine"] == r8["chosen"]][0]
    low = min(r["figures"]["total_volume"] for r in starts)
    assert s.total_volume <= max(chosen["figures"]["total_volume"], int(low * 1.03))
    w = np.maximum(g.row_nnz, 1)
    assert np.bincount(many, weights=w).max() <= np.floor(1.03 * np.ceil(w.sum() / 8))
    again, _ = auto_partition(g, 8, refine_rounds=8, volume_work=0)
    assert np.array_equal(again, many)


def test_refine_rounds_option_through_partition():
    g = _graph(600)
    p = partition(g, 4, refine_rounds=1)
    assert len(p.info["refine"]["rounds"]) == 1
    with pytest.raises(OptionError):
        partition(g, 4, refine_rounds="many")


def _with_isolated(g, extra, seed=1):
    """``g`` with ``extra`` isolated vertices interleaved; returns (graph, new id of each old row)."""
    rng = np.random.default_rng(seed)
    n2 = g.n + extra
    pos = np.sort(rng.choice(n2, g.n, replace=False))
    r = np.repeat(np.arange(g.n), np.diff(g.indptr))
    return Graph.from_edges(pos[r], pos[g.indices], n=n2, symmetrize=True), pos


def test_isolated_rows_do_not_break_compute_balance():
    """Rows with no nonzero in row or column weigh 1 in the planner's balance but 0 in the compute
    load: the pipeline partitions the other rows alone (the same partition as the graph without
    them), then spreads the isolated ones, so the compute imbalance (analyze) stays what it is
    without them while the balance weights hold the ε-limit. Before, with 60 % of the rows isolated,
    a part could hold (1 + ε) × the mean balance weight in nonzeros alone."""
    from partplan.partition.pipeline.auto import balanced, isolated_rows

    g = _graph(1200, seed=5)
    h, pos = _with_isolated(g, 1800)
    assert isolated_rows(h).sum() == 1800
    for k in (4, 16):
        base, _ = auto_partition(g, k)
        part, rep = auto_partition(h, k)
        assert rep["isolated_rows"] == 1800 and np.array_equal(part[pos], base)
        sg, sh = analyze(g, base, k), analyze(h, part, k)
        assert sh.total_volume == sg.total_volume and np.array_equal(sh.volume, sg.volume)
        assert np.array_equal(sh.compute_load, sg.compute_load)     # the same nonzeros per part
        assert balanced(h, part, k, 0.03) and part.min() >= 0 and part.max() < k


@pytest.mark.parametrize("case", ["isolated rows", "directed, empty rows"])
def test_vertex_weights_are_the_balance_with_empty_and_isolated_rows(case):
    """The caller's vertex weights are what the ε-limit bounds (Graph.balance_weights). With
    isolated rows the pipeline used to set them aside on a graph built without the weights, and
    with empty rows it kept the row-nnz compute limit beside them, which a heavy row with few
    nonzeros contradicts: the vertex weights ended 1.37x the mean at k = 4. Checked against
    ⌊(1+ε)·⌈W/k⌉⌋ of the weights, counted here."""
    g = _graph(1200, seed=7)
    if case == "isolated rows":
        g, _ = _with_isolated(g, 400)
    else:                                   # keep only the edges u -> v with u < v: the last rows are empty
        r = np.repeat(np.arange(g.n), np.diff(g.indptr))
        up = r < g.indices
        g = Graph.from_edges(r[up], g.indices[up], n=g.n)
    assert (g.row_nnz == 0).sum() >= 20
    vw = np.ones(g.n, np.int64)
    vw[np.flatnonzero(g.row_nnz <= 2)[:40]] = 200            # heavy rows with few nonzeros
    h = Graph(g.indptr, g.indices, g.data, vertex_weights=vw, name="weighted")
    for k in (4, 8):
        part = partition(h, k).part
        limit = int(np.floor(1.03 * -(-int(vw.sum()) // k)))
        assert np.bincount(part, weights=vw, minlength=k).max() <= limit
        assert part.min() >= 0 and part.max() < k


def test_isolated_rows_go_one_at_a_time_to_the_fewest_rows_within_the_limit():
    """The closed form equals the brute force: each isolated row in turn to the part with the
    fewest rows among those below the ε-limit of the balance weights (ties: lowest id), to the
    lightest part (balance weight) once none is below it; the other rows keep their parts."""
    from partplan.partition.objectives import eps_limit
    from partplan.partition.pipeline.auto import spread_isolated

    rng = np.random.default_rng(3)
    for trial in range(400):
        k = int(rng.integers(1, 9))
        n_sub = int(rng.integers(k, 30))
        deg = rng.integers(1, 6, n_sub) * (1 if trial % 3 else int(rng.integers(1, 20)))
        e = int(rng.integers(1, 40))
        empty = np.zeros(n_sub + e, bool)
        empty[rng.choice(n_sub + e, e, replace=False)] = True
        row_nnz = np.zeros(n_sub + e, np.int64)
        row_nnz[~empty] = deg
        # balanced sub-partitions, and skewed ones that leave no room in some parts
        sub_part = rng.integers(0, k, n_sub) if trial % 2 else np.minimum(rng.integers(0, 2 * k, n_sub), k - 1)
        imbalance = float(rng.choice([0.0, 0.03, 0.5]))

        class G:                     # only what spread_isolated reads
            n = n_sub + e
        G.row_nnz = row_nnz
        G.balance_weights = np.maximum(row_nnz, 1)
        part = spread_isolated(G, sub_part, empty, k, imbalance)
        load = np.bincount(sub_part, weights=deg, minlength=k).astype(np.int64)
        rows = np.bincount(sub_part, minlength=k).astype(np.int64)
        limit = eps_limit(int(G.balance_weights.sum()), k, imbalance)
        assert np.array_equal(part[~empty], sub_part)
        assert np.array_equal(np.bincount(part[empty], minlength=k), _one_at_a_time(load, rows, e, limit)[0])
        assert np.all(np.diff(part[empty]) >= 0)          # in id order to the parts in id order
        # the limit of the whole graph's weights always has room for them all
        assert np.bincount(part, weights=G.balance_weights, minlength=k).max() <= max(limit, load.max())


def _one_at_a_time(load, rows, e, limit):
    """(rows given per part, rows given with no part below the limit): the brute force."""
    load, rows = load.copy(), rows.copy()
    want, full = np.zeros(load.size, np.int64), 0
    for _ in range(e):
        room = np.flatnonzero(load < limit)
        if room.size:
            p = int(room[np.lexsort((room, rows[room]))[0]])
        else:
            full += 1
            p = int(np.lexsort((np.arange(load.size), load))[0])
        load[p] += 1
        rows[p] += 1
        want[p] += 1
    return want, full


def test_fill_isolated_with_any_limit():
    """fill_isolated's closed form against the brute force for limits below and above the parts'
    weights, so that the rows beyond the room go to the lightest parts as well."""
    from partplan.partition.pipeline.auto import fill_isolated

    rng = np.random.default_rng(11)
    full = 0
    for _ in range(500):
        k = int(rng.integers(1, 10))
        load = rng.integers(0, 60, k)
        rows = rng.integers(0, 30, k)
        e = int(rng.integers(0, 80))
        limit = int(rng.integers(0, 90))
        want, f = _one_at_a_time(load, rows, e, limit)
        full += f > 0
        assert np.array_equal(fill_isolated(load, rows, e, limit), want)
    assert full > 20


def test_every_balanced_start_is_refined_above_the_small_size(monkeypatch):
    """Two starts (METIS, KaMinPar: the size rule above SMALL_NNZ): each one as balanced as the
    kept one is refined, side by side or one after the other with the same partition; with
    REFINE_ALL_NNZ below the graph's size only the kept start is. Figures checked by analyze."""
    from partplan.partition.pipeline import auto as pipeline

    g = _graph(3000, seed=2)
    monkeypatch.setattr(pipeline, "SMALL_NNZ", 0)
    part2, rep2 = auto_partition(g, 8, threads=2)
    part1, rep1 = auto_partition(g, 8, threads=1)
    assert [r["engine"] for r in rep2["starts"]] == ["metis", "kaminpar"]
    kept = min(r["overload"] for r in rep2["starts"])
    assert set(rep2["refined_starts"]) == {r["engine"] for r in rep2["starts"] if r["overload"] == kept}
    assert np.array_equal(part1, part2) and rep1["refined_starts"] == rep2["refined_starts"]
    s = analyze(g, part2, 8)
    assert max(int(s.volume.sum(1).max()), int(s.volume.sum(0).max())) == figures(g, part2, 8)["max_send_recv"]
    monkeypatch.setattr(pipeline, "REFINE_ALL_NNZ", 0)
    _, rep = auto_partition(g, 8, threads=2)
    assert rep["refined_starts"] == [rep["chosen"]]


def test_refine_cycles_never_worse_exact_within_limits_and_deterministic():
    """refine_cycles > 1: refinement + volume round again from the volume round's result. The
    result is never above the one-cycle pipeline's max (the cycles start from it), its figures are
    what analyze recounts, the total volume stays within the first refinement's limit and the
    ε-limit holds; the cycles end at the first one that does not lower the max; same result on
    one core and two."""
    g = _graph(2500, seed=4)
    one, r1 = auto_partition(g, 8, refine_cycles=1, threads=1)
    many, rc = auto_partition(g, 8, refine_cycles=5, threads=1)
    trail = rc["cycles"]["trail"]
    assert "cycles" not in r1 and trail[0] == (r1["volume_round"]["after"]["max_send_recv"],
                                               r1["volume_round"]["after"]["total_volume"])
    assert 2 <= len(trail) <= 5
    assert all(a[0] > b[0] for a, b in zip(trail[:-2], trail[1:-1]))     # went on only while the max fell
    if len(trail) < 5:
        assert trail[-1][0] >= trail[-2][0]                                # ended by a cycle that did not
    s = analyze(g, many, 8)
    got = (max(int(s.volume.sum(1).max()), int(s.volume.sum(0).max())), int(s.total_volume))
    assert min(trail) == (rc["volume_round"]["after"]["max_send_recv"], rc["volume_round"]["after"]["total_volume"])
    cv = rc["cluster_volume"]      # the stage after the cycles: never higher on either figure
    assert (cv["before"]["max_send_recv"], cv["before"]["total_volume"]) == min(trail)
    assert got == (cv["after"]["max_send_recv"], cv["after"]["total_volume"])
    assert got[0] <= min(trail)[0] and got[1] <= min(trail)[1]
    assert got[0] <= figures(g, one, 8)["max_send_recv"]
    chosen = [r for r in rc["starts"] if r["engine"] == rc["chosen"]][0]
    low = min(r["figures"]["total_volume"] for r in rc["starts"])
    assert s.total_volume <= max(chosen["figures"]["total_volume"], int(low * 1.03))
    w = np.maximum(g.row_nnz, 1)
    assert np.bincount(many, weights=w).max() <= np.floor(1.03 * np.ceil(w.sum() / 8))
    again, _ = auto_partition(g, 8, refine_cycles=5, threads=2)
    assert np.array_equal(again, many)


def test_refine_cycles_option_through_partition_and_bad_values(monkeypatch):
    from partplan.partition.pipeline import auto as pipeline

    g = _graph(600)
    p = partition(g, 4)                                   # the default runs the cycles
    assert 2 <= len(p.info["auto"]["cycles"]["trail"]) <= pipeline.DEFAULT_REFINE_CYCLES
    assert "cycles" not in partition(g, 4, refine_cycles=1).info["auto"]
    assert "cycles" not in partition(g, 4, refine_cycles=3, volume_work=0).info["auto"]   # needs its volume round
    monkeypatch.setattr(pipeline, "LARGE_PINS", g.nnz + g.n - 1)    # a large graph: one cycle by default
    assert "cycles" not in partition(g, 4).info["auto"]
    assert len(partition(g, 4, refine_cycles=2).info["auto"]["cycles"]["trail"]) >= 2   # asked for: runs
    for bad in (dict(refine_cycles=0), dict(refine_cycles="x"), dict(refine_cycles=10 ** 6),
                dict(cycle_work=-1.0), dict(cycle_work=float("nan"))):
        with pytest.raises(OptionError):
            partition(g, 4, **bad)
