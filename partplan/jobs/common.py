"""Pieces the graph jobs share: reading a plan on a worker context, progress
lines, atomic outputs, the CLI's plan argument and pre-start checks, the
report's header."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import PlanError
from ..layouts import layout_from_manifest
from ..program.plan import manifest_groups


def plan_inputs(ctx, cfg: dict) -> tuple[dict, list, object]:
    """(manifest, the shards this process holds, comm) of the plan directory ``cfg["plan"]``."""
    from ..plan.store import read_manifest
    m = read_manifest(cfg["plan"])
    shards = ctx.shards(cfg["plan"], m)
    return m, shards, ctx.comm(manifest_groups(m), int(m["ranks"]))


def resolved_kernels(cfg: dict, ctx) -> str:
    """The kernel table a job runs with: ``cfg["kernels"]`` ("auto" resolved for the context's device)."""
    from ..runtime.kernels import resolve
    return resolve(cfg.get("kernels", "auto"), ctx.device)


#: seconds between the progress lines a job prints without --progress (a long run says where it is)
PROGRESS_EVERY_S = 5.0


def progress(cfg: dict, leader: bool, msg: str) -> None:
    """A progress line from the leader when ``cfg["progress"]``: to the
    launcher's progress file (it echoes them), else to stderr. ``True``: every
    line; ``"throttled"`` (the CLI's default): one every :data:`PROGRESS_EVERY_S`
    seconds, the first that long after the job's first line."""
    if not (cfg.get("progress") and leader):
        return
    if cfg["progress"] == "throttled":      # the time of the last line said is kept in the job's config
        now = time.monotonic()
        if now - cfg.setdefault("_progress_said", now) < PROGRESS_EVERY_S:
            return
        cfg["_progress_said"] = now
    if cfg.get("progress_file"):
        with open(cfg["progress_file"], "a") as fh:
            fh.write(msg + "\n")
    else:
        print(msg, file=sys.stderr, flush=True)


def progress_fn(cfg: dict, ctx):
    """``progress(msg)`` for the job's loop, or None without ``--progress``."""
    return (lambda msg: progress(cfg, ctx.leader, msg)) if cfg.get("progress") else None


def atomic_save(path, write) -> None:
    """``write(tmp)`` then rename ``tmp`` onto ``path`` (never half-written)."""
    from .._atomic import atomic_path
    with atomic_path(path, suffix=Path(path).suffix) as tmp:
        write(tmp)


def family_totals(records: list[dict], key: str) -> dict:
    """Sum over ``records`` of their per-family figures (``key``: payload bytes
    or messages per group family)."""
    out: dict = {}
    for rec in records:
        for f, v in (rec.get(key) or {}).items():
            out[f] = out.get(f, 0) + int(v)
    return out


def base_report(cfg: dict, m: dict, ctx, kernels: str) -> dict:
    """The keys every graph job's report starts with."""
    return {"job": cfg["job"], "ranks": m["ranks"], "backend": ctx.backend, "device": ctx.device,
            "kernels": kernels, "layout": m["layout"], "n": m["graph"]["n"], "nnz": m["graph"]["nnz"],
            "directed": not m["graph"]["symmetric"]}


# ----------------------------------------------------------------------------- CLI
def add_plan_options(parser, *, capability: str) -> None:
    """PLAN, --route, --progress: the options of a job on a plan directory
    whose layout has ``capability`` (a :class:`~partplan.layouts.Layout` flag)."""
    parser.add_argument("plan", metavar="PLAN", help=f"plan directory (a layout that supports {capability})")
    parser.add_argument("--routed", dest="route", action="store_true",
                        help="insist on a routed exchange through domain monitors: the plan must have a routed "
                             "layout (`partplan plan ... --layout routed:domain:D` or --route); a routed plan runs "
                             "routed without it")
    parser.add_argument("--progress", action="store_true", default=None,
                        help=f"a progress line per search / iteration on stderr (default: one every "
                             f"{PROGRESS_EVERY_S:g} s of a long run; -q: none)")


def add_output_option(parser, kind: str, what: str) -> None:
    """--output FILE.<kind>: ``what`` it holds."""
    parser.add_argument("-o", "--output", metavar=f"FILE.{kind}", help=f"write the output file ({what})")


def checked_output(path, kind: str) -> str | None:
    """``path`` checked as a writable ``.kind`` output (None passes)."""
    from ..io.outpath import check_output_file
    return None if path is None else str(check_output_file(path, kind=kind))


def precheck_plan(cfg: dict, args, *, capability: str, job: str | None = None) -> dict:
    """Refuse a bad plan, layout, root or process count before starting
    anything; returns the manifest. ``capability``: the layout flag the job
    needs (``bfs``, ``analytics``; ``stealing`` too with ``--steal``); ``job``
    names the job in a refusal."""
    from ..plan.store import read_manifest
    from ..runtime.launch import check_nprocs
    from ..runtime.traversal import check_layout, traversal_program
    m = read_manifest(cfg["plan"])
    if getattr(args, "route", False) and not layout_from_manifest(m).routes:
        raise PlanError(f"--routed: {cfg['plan']} has layout {m['layout']}, not a routed one; plan the graph with "
                        f"`partplan plan ... --layout routed:domain:D` (or --topology ... --route domain)")
    check_layout(m, (capability, "stealing") if cfg.get("steal") else capability, job=job)
    if cfg.get("steal"):
        from ..runtime.steal import StealConfig
        StealConfig.from_cfg(cfg, int(m["ranks"]))  # a bad topology / threshold fails here, before any process
    traversal_program(m)
    n = int(m["graph"]["n"])
    if cfg.get("root") is not None and not 0 <= int(cfg["root"]) < n:
        raise PlanError(f"--root {cfg['root']} is not a vertex id of the plan's graph (n = {n})")
    check_nprocs(cfg["plan"], m, args.nprocs)
    return m


def render_header(rep: dict) -> list[str]:
    """The first line of a graph job's text report."""
    return [f"{rep['job']}: n={rep['n']:,} nnz={rep['nnz']:,} ranks={rep['ranks']} backend={rep['backend']} "
            f"device={rep['device']} kernels={rep['kernels']} layout={rep['layout']}"]


def render_footer(rep: dict) -> list[str]:
    """Where the bytes went (routed / 2d families), the balancer, the output."""
    out = []
    fam = rep.get("bytes_by_family") or {}
    if len(fam) > 1:  # routed (dom / cross) or 2d (col / row): where the bytes went
        msgs = rep.get("messages_by_family") or {}
        out.append("bytes by family    " + ", ".join(f"{f} {b:,} ({msgs.get(f, 0):,} messages)"
                                                     for f, b in fam.items()))
    if rep.get("steal"):
        st = rep["steal"]
        gb, ga = st.get("geomean_before"), st.get("geomean_after")
        out.append(f"steal ({st['mode']}) {st['levels_triggered']} levels triggered, max/mean geomean "
                   + (f"{gb:.3f} -> {ga:.3f}" if gb is not None else "-") + f", {st['stolen_edges']:,} edges stolen, "
                   f"{st['steal_bytes']:,} bytes, solve {st['solve_s'] * 1e3:.1f} ms")
    if rep.get("output"):
        out.append(f"output             {rep['output']}")
    return out
