"""What a reader checks in a plan before it trusts it (issue 21).

A plan is input like any other: anyone who edits a shard can re-sign it (the
checksums only catch accidents). So every reader of a rank's shard
(:func:`partplan.plan.store.load_rank`, hence ``load_plan``, the workers and
``DistSpMM``) runs :func:`shard_problems` before anything indexes with the
shard's arrays or allocates a buffer sized by it, and the JSON of a manifest
or a shard's metadata is parsed by :func:`load_json` (depth and integer
length bounded). Strings from files never become paths
(:func:`plain_name_problem`) and are escaped before they reach a terminal
(:func:`printable`).

Every check here is vectorized (one ``min``/``max``/``sum`` pass over an
array) or works on the manifest's small lists; nothing touches the whole
graph.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import PlanError

# ----------------------------------------------------------------------------- JSON with limits
MAX_JSON_DEPTH = 64          # nesting of objects / arrays; a plan manifest needs 5
MAX_INT_DIGITS = 20          # int64 has at most 19 digits (+ sign)
MAX_JSON_BYTES = 1 << 30     # 1 GiB: a manifest listing 10^4 ranks' pairs is far below it

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(raw: bytes) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text ``raw`` (strings ignored;
    vectorized: one regex pass, one cumulative sum)."""
    body = _STRING.sub(b'""', raw)
    a = np.frombuffer(body, dtype=np.uint8)
    step = (a == ord("[")).astype(np.int32) + (a == ord("{")) - (a == ord("]")) - (a == ord("}"))
    return int(np.cumsum(step).max()) if step.size else 0


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _JsonLimit(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_constant(name: str):
    raise _JsonLimit(f"{name} is not a JSON number")


class _JsonLimit(ValueError):
    pass


def load_json(raw: bytes | str, where: str) -> Any:
    """Parse JSON text from a file with limits: at most :data:`MAX_JSON_BYTES`
    bytes, :data:`MAX_JSON_DEPTH` levels of nesting, integers of at most
    :data:`MAX_INT_DIGITS` digits, no NaN / Infinity. ``where`` (the file)
    starts the one :class:`PlanError` raised otherwise."""
    import json
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_JSON_BYTES:
        raise PlanError(f"{where}: {len(raw)} bytes of JSON, more than a plan needs ({MAX_JSON_BYTES})")
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise PlanError(f"{where}: JSON nested {depth} levels deep (at most {MAX_JSON_DEPTH})")
    try:
        return json.loads(raw, parse_int=_parse_int, parse_constant=_parse_constant)
    except _JsonLimit as exc:
        raise PlanError(f"{where}: not a plan's JSON: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise PlanError(f"{where}: not valid JSON ({printable(str(exc))})") from None


# ----------------------------------------------------------------------------- names and terminals
_MAX_NAME = 200
_BAD_NAME_CHARS = re.compile(r"[/\\\x00-\x1f\x7f-\x9f:]")


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` (a string read from a file) cannot be used as a file name
    — None when it can. A plain name is 1..200 characters, holds no ``/``,
    ``\\``, ``:``, NUL or other control character, does not start with ``.``
    or ``-`` (so it is never ``.``, ``..``, a hidden file or an option) and is
    not all blanks."""
    if not isinstance(name, str):
        return f"is not a string ({type(name).__name__})"
    if not name or not name.strip():
        return "is empty"
    if len(name) > _MAX_NAME:
        return f"is {len(name)} characters long (at most {_MAX_NAME})"
    if _BAD_NAME_CHARS.search(name):
        return "holds a path separator, ':' or a control character (it must be a plain name, not a path)"
    if name[0] in ".-":
        return f"starts with {name[0]!r} (it must be a plain name, not a path or an option)"
    return None


def plain_name(name, default: str = "graph") -> str:
    """``name`` made a plain name (:func:`plain_name_problem` is None for the
    result) by the documented rule: each path separator, ``:`` and control
    character becomes ``_``, leading ``.`` / ``-`` are dropped, the rest is cut
    to 200 characters; nothing left gives ``default``. What a writer stores;
    a reader refuses a name that breaks the rule instead of repairing it."""
    s = _BAD_NAME_CHARS.sub("_", str(name))[:_MAX_NAME].lstrip(".-")
    return s if s.strip() else default


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(s: Any) -> str:
    """``str(s)`` with every control character (ANSI escapes, carriage
    returns, newlines, bidi overrides) written as a backslash escape, so a
    string from a file printed to a terminal is shown, never obeyed."""
    s = str(s)
    if not _CONTROL.search(s):
        return s
    return _CONTROL.sub(lambda mt: mt.group(0).encode("unicode_escape").decode("ascii"), s)


# ----------------------------------------------------------------------------- one rank's shard
def _int_array(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def pairs_of(st: dict, rank: int, members: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(rows ``rank`` sends to each member, rows it receives from each) in
    group-rank order, from the manifest's ``pairs`` (no p × p matrix)."""
    pos = {r: i for i, r in enumerate(members)}
    send = np.zeros(len(members), dtype=np.int64)
    recv = np.zeros(len(members), dtype=np.int64)
    for q, r, rows in st.get("pairs", ()):
        if q == rank and r in pos:
            send[pos[r]] += rows
        if r == rank and q in pos:
            recv[pos[q]] += rows
    return send, recv


def shard_problems(m: dict, rp, *, pairs: bool = True) -> list[str]:
    """Structure problems of one rank's shard ``rp`` (a :class:`RankPlan`)
    against the manifest ``m`` — what ``partplan validate`` reports as its
    ``structure`` check, run by every reader before it indexes:

    * every array is 1-D, index arrays integers, ``*.data`` floats;
    * the shard's program prefixes are the manifest's; ``in`` / ``out``
      buffers are as long as ``in_ids`` / ``out_ids``, whose ids lie in
      ``[0, graph.n)``;
    * every alltoallv step has one count per group member, each in
      ``[0, bound]``, and (``pairs``) equal to the manifest's pairs for this
      rank. ``pairs=False`` leaves that equality to the executor, whose
      start-up check compares counts with the pairs on every rank and stops
      every rank with the same error (one rank failing alone at load time
      would leave its peers waiting in the first collective); the sizes below
      are bounded by the manifest's pairs either way;
    * every buffer has at most as many rows as the shard's arrays and the
      received rows can fill (a buffer of 2^40 rows in a small shard is
      refused before anything is allocated);
    * each step op's own check (:func:`partplan.plan.steps.structure_problems`:
      indices inside their buffers, CSR pointers, counts fitting).

    Returns problem strings naming the field (empty: the shard is safe to
    index with). Cost: one pass over each array, O(pairs) over the manifest."""
    from .builder import program_steps
    from .steps import AllToAllV, step_op, structure_problems

    n, rank = int(m["graph"]["n"]), int(rp.rank)
    probs: list[str] = []
    held = 0
    for name, a in rp.arrays.items():
        held += int(a.size)
        if a.ndim != 1:
            probs.append(f"field {name!r} is not a 1-D array")
        elif name.endswith(".data"):
            if a.dtype.kind != "f":
                probs.append(f"field {name!r} holds {a.dtype}, not float values")
        elif not _int_array(a):
            probs.append(f"field {name!r} holds {a.dtype}, not integer indices")
    if probs:
        return probs
    families = {}
    for g in m["groups"]:
        if rank in g["ranks"]:
            families.setdefault(g["name"].split(".", 1)[0], list(g["ranks"]))
    for prog in m["programs"]:
        pm = rp.meta["programs"].get(prog)
        pr = m["programs"][prog]
        want_prefix = m["programs"][pr["same_as"]]["prefix"] if "same_as" in pr else pr["prefix"]
        if not isinstance(pm, dict) or pm.get("prefix") != want_prefix:
            probs.append(f"metadata field 'programs.{prog}.prefix' is not the manifest's {want_prefix!r}")
            continue
        if not isinstance(pm.get("writes_output"), bool):
            probs.append(f"metadata field 'programs.{prog}.writes_output' must be true or false")
        bufs = pm["buffers"]
        for key, buf in (("in_ids", "in"), ("out_ids", "out")):
            ids = rp.arrays[f"{want_prefix}.{key}"]
            if bufs.get(buf) != ids.size:
                probs.append(f"metadata field 'programs.{prog}.buffers.{buf}' = {bufs.get(buf)!r} but field "
                             f"'{want_prefix}.{key}' holds {ids.size} ids")
            elif ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                probs.append(f"field '{want_prefix}.{key}' holds ids outside [0, graph.n = {n})")
        if probs:
            return probs
        steps = program_steps(m, prog)
        received = 0
        for st in steps:
            if step_op(st) is not AllToAllV:
                continue
            sid = st["id"]
            sc, rc = rp.arrays[f"{sid}.send_counts"], rp.arrays[f"{sid}.recv_counts"]
            members = families.get(st["group"])
            if members is None:
                if sc.size or rc.size:
                    probs.append(f"fields '{sid}.send_counts' / '{sid}.recv_counts': rank {rank} is in no group "
                                 f"of family {st['group']!r} but has counts")
                continue
            want_s, want_r = pairs_of(st, rank, members)
            cap = held + int(want_r.sum()) + int(want_s.sum())
            for nm, c, want in ((f"{sid}.send_counts", sc, want_s), (f"{sid}.recv_counts", rc, want_r)):
                if c.size != len(members):
                    probs.append(f"field {nm!r} has {c.size} counts for the {len(members)} members of rank "
                                 f"{rank}'s group of family {st['group']!r}")
                elif c.size and (int(c.min()) < 0 or int(c.max()) > cap):
                    probs.append(f"field {nm!r} holds counts outside [0, {cap}]")  # sums cannot overflow
                elif pairs and not np.array_equal(c, want):
                    probs.append(f"field {nm!r} differs from the manifest's pairs for rank {rank} "
                                 f"(programs.{prog}: {st['id']}.pairs)")
            received += int(want_r.sum())
        if probs:
            return probs
        bound = held + received  # every row of a buffer comes from an array of the shard or a received row
        for buf, rows in bufs.items():
            if rows > bound:
                probs.append(f"metadata field 'programs.{prog}.buffers.{buf}' = {rows} rows, more than the "
                             f"shard's arrays and received rows can fill ({bound})")
        if probs:
            return probs
        if "same_as" not in pr:  # the same steps and arrays as the program it names
            probs += [f"{prog}: {x}" for x in structure_problems(steps, rp, bufs)]
    return probs


def check_shard(m: dict, rp, where, *, pairs: bool = False) -> None:
    """:func:`shard_problems` as one :class:`PlanError` starting with the
    shard file ``where`` (the first problem; the count of others)."""
    probs = shard_problems(m, rp, pairs=pairs)
    if probs:
        more = f" (+{len(probs) - 1} more)" if len(probs) > 1 else ""
        raise PlanError(f"{where}: {probs[0]}{more}")


__all__ = ["pairs_of", "load_json", "json_depth", "plain_name_problem", "plain_name", "printable", "shard_problems", "check_shard",
           "MAX_JSON_DEPTH", "MAX_INT_DIGITS"]
