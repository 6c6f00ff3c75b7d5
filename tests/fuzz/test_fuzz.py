"""The readers under mutation fuzzing (issue #53, part 2; engine: fuzz_engine.py).

A bounded run with a fixed seed: every reader's cases end in a clean refusal
naming the file or in an accepted result whose invariants hold — never a
traceback, a hang, a crash, or a PartplanError that names no file. ``make fuzz``
runs many more cases (``FUZZ_CASES``, default 10000 per reader) and prints the
outcomes by class."""
from __future__ import annotations

import os

import pytest

import fuzz_engine as fe

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

CASES = int(os.environ.get("FUZZ_TEST_CASES", 60))
SEED = 53


@pytest.mark.dist
def test_every_reader_refuses_cleanly_or_accepts_valid(tmp_path):
    """One worker process runs every reader's cases (a crash or a hang there is a finding, not the
    end of the test run)."""
    report = fe.run(list(fe.TARGETS), SEED, CASES, root=tmp_path)
    print(report.table())
    assert set(report.cases) == set(fe.TARGETS), report.cases
    for reader, counts in report.cases.items():
        assert sum(counts.values()) == CASES, (reader, counts)
        assert counts["refused"] > 0, (reader, counts)   # the mutations reach the reader's checks
    assert not report.findings, "\n".join(
        f"{f['reader']} case {f['index']} {f['class']} ({f.get('mutation', '')}): {f['detail']}"
        for f in report.findings[:8]) + f"\nreplay: python tests/fuzz/fuzz_engine.py replay READER {SEED} CASE"


# the cases that found defects (seed 0; python tests/fuzz/fuzz_engine.py replay READER 0 CASE):
# a damaged zip member's local header (BadZipFile, OSError), a .npy header numpy's tokenizer chokes on
# (TokenError), a zip version zipfile does not read (NotImplementedError), a non-UTF-8 npz 'format',
# a share entry whose bytes is null, a chunked header whose index_dtype is an object (TypeError), a
# Parquet footer whose level histogram pyarrow's metadata aborts the process on (SIGABRT), a .npy
# descr numpy literal_evals (SyntaxError), a zip member name flagged UTF-8 that is not, a PyG Data
# without its storage (RuntimeError on any attribute)
FOUND = [("data-npz", 4), ("data-npz", 9), ("data-npz", 16), ("data-npz", 574), ("npz", 144), ("manifest", 1483),
         ("chunked", 521), ("parquet", 967), ("part-parquet", 648), ("parquet", 3083), ("npz", 5316),
         ("data-npz", 3153), ("pt", 7997)]


@pytest.mark.dist
def test_the_cases_that_found_defects_are_refused(tmp_path):
    report = fe.run([], 0, 0, root=tmp_path, only=FOUND)
    assert not report.findings, report.findings
    assert sum(c["refused"] for c in report.cases.values()) == len(FOUND), report.cases


def test_mutations_are_reproducible(tmp_path):
    import random
    a = fe.mutate(random.Random("1:x:2"), b"0123456789" * 10, "text")
    b = fe.mutate(random.Random("1:x:2"), b"0123456789" * 10, "text")
    assert a == b


@pytest.mark.dist
def test_a_worker_dying_of_a_signal_is_a_crash_and_the_run_goes_on(tmp_path, monkeypatch):
    """The parent's side: a case that kills the worker is classified ``crash`` and the next case runs."""
    monkeypatch.setenv("FUZZ_KILL_AT", "npz:2")
    rep = fe.run(["npz"], SEED, 4, root=tmp_path)
    assert rep.cases["npz"]["crash"] == 1 and sum(rep.cases["npz"].values()) == 4, rep.cases
    assert [f["index"] for f in rep.findings] == [2]
