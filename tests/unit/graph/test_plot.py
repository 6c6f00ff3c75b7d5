"""partplan.plot: valid, non-blank PNGs for 1D / 1.5D / 2D stats and the
method comparison; bad tables raise; pyplot's global state is left alone."""
import os

import matplotlib.image as mpimg
import numpy as np
import pytest

from partplan import Graph, analyze, analyze_15d, analyze_2d
from partplan.plot import plot_compare, plot_volume


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(0)
    n = 400
    return Graph.from_edges(rng.integers(0, n, 3000), rng.integers(0, n, 3000), n=n, symmetrize=True,
                            name="rand400")


def check_png(path, min_w=600, min_h=300):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h
    assert float(np.std(img[..., :3])) > 0.05  # something was drawn
    return img


@pytest.mark.parametrize("k", [2, 16, 100])
def test_plot_volume_1d(graph, tmp_path, k):
    part = np.arange(graph.n) % k
    out = plot_volume(analyze(graph, part, k, name="striped"), tmp_path / "a" / f"v{k}.png")
    assert out == tmp_path / "a" / f"v{k}.png"
    check_png(out)
    assert not [f for f in os.listdir(tmp_path / "a") if f.startswith(".")]  # no temp file left


def test_plot_volume_layouts(graph, tmp_path):
    part = np.arange(graph.n) % 8
    check_png(plot_volume(analyze_15d(graph, part, 3), tmp_path / "15d.png"))
    check_png(plot_volume(analyze_2d(graph, part, 2, 4), tmp_path / "2d.png", title="custom title"))


def test_plot_volume_all_zero(tmp_path):
    g = Graph.from_edges([0, 1], [0, 1], n=4)  # only self loops: nothing to send
    s = analyze(g, [0, 1, 2, 3])
    assert s.total_volume == 0
    check_png(plot_volume(s, tmp_path / "zero.png"))


def test_plot_compare(graph, tmp_path):
    table = {"block": analyze(graph, np.arange(graph.n) * 8 // graph.n, 8),
             "striped": analyze(graph, np.arange(graph.n) % 8, 8),
             "dict": {"total_volume": 100, "max_send": 20, "max_recv": 30}}
    check_png(plot_compare(table, tmp_path / "c.png", reference="block"))
    check_png(plot_compare({"only": table["dict"]}, tmp_path / "c1.png"))


def test_plot_compare_errors(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        plot_compare({}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="lacks"):
        plot_compare({"a": {"total_volume": 1}}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="reference"):
        plot_compare({"a": {"total_volume": 1, "max_send": 1, "max_recv": 1}}, tmp_path / "x.png",
                     reference="b")
    assert not (tmp_path / "x.png").exists()


def test_pyplot_state_untouched(graph, tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    plot_volume(analyze(graph, np.arange(graph.n) % 4, 4), tmp_path / "p.png")
    assert plt.get_fignums() == before
