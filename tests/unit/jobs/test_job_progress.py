"""Progress of the graph jobs (``run bfs|graph500|pagerank|...``): a long run says where it is
without --progress (one line every PROGRESS_EVERY_S seconds), --progress prints every line, -q none."""
from __future__ import annotations

import pytest

from partplan.jobs import common


def test_the_default_is_one_line_every_few_seconds(monkeypatch, capsys):
    now = [100.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: now[0])
    cfg = {"progress": "throttled"}
    for step in range(12):             # a line every 1.5 s of the loop
        common.progress(cfg, True, f"search {step}")
        now[0] += 1.5
    said = capsys.readouterr().err.splitlines()
    assert said == ["search 4", "search 8"]         # 6 s and 12 s after the first line (every 5 s at most)
    for value, lines in ((True, 3), (False, 0)):
        for step in range(3):
            common.progress({"progress": value}, True, f"line {step}")
        assert len(capsys.readouterr().err.splitlines()) == lines
    common.progress({"progress": True}, False, "not the leader")
    assert capsys.readouterr().err == ""


class _Captured(Exception):
    pass


@pytest.mark.parametrize("argv, want", [([], "throttled"), (["--progress"], True), (["-q"], False),
                                        (["-q", "--progress"], False)])
def test_the_cli_chooses_the_progress(argv, want, monkeypatch, tmp_path):
    """The job's config as `partplan run pagerank` hands it to the launcher (run_job_cmd: -q wins)."""
    import partplan.jobs
    from partplan.cli._common import run_job_cmd
    from partplan.cli.main import build_parser
    from partplan.datasets import load_graph
    from partplan.plan import build_plan, write_plan
    g = load_graph("polblogs")
    plan = write_plan(build_plan(g, [v % 2 for v in range(g.n)], 2), tmp_path / "p.plan")

    def captured(job, cfg, **kw):
        raise _Captured(cfg)
    monkeypatch.setattr(partplan.jobs, "execute", captured)
    args = build_parser().parse_args(["run", "pagerank", str(plan), "--backend", "local", *argv])
    with pytest.raises(_Captured) as ei:
        run_job_cmd(args)
    assert ei.value.args[0]["progress"] == want
