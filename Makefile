# gputok: the one entry point. `make test` and `make serve` each do all their own set-up.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: help setup build lint format audit sanitize sanitize-quick test test-fast test-e2e bench bench-quick bench-corpus bench-corpus-quick bench-parquet perf-inputs perf-concurrency perf-rate perf-protocols perf-ensemble perf-report soak serve gpu-check gpu-carry unicode-tables gpt2-files clean

help:
	@echo "make setup      venv, system and Python deps, build (idempotent)"
	@echo "make test       set-up, lint, pip-audit, the whole pytest suite (what CI runs)"
	@echo "make audit      pip-audit of the pinned requirements (docs/security.md)"
	@echo "make test-fast  the suite without slow and end-to-end tests;  make test-e2e  only those"
	@echo "make perf-concurrency | perf-rate | perf-protocols | perf-ensemble | perf-report  perf_analyzer scenarios (docs/perf_analyzer.md); perf-report writes perf_analyzer_configs/results/"
	@echo "make soak       5-minute perf_analyzer soak of the ensemble, c=32: RSS, fds (docs/reliability.md)"
	@echo "make serve      set-up, then tritonserver on 127.0.0.1 with model_repository/"
	@echo "make bench      CPU benchmark vs tiktoken, HF, gigatoken -> bench/results/<date>-bench-runs.md"
	@echo "make bench-corpus  corpus tokenization (Dask) vs gigatoken -> bench/results/<date>-bench-runs.md"
	@echo "make bench-parquet  Parquet decoding alone: gputok's page reader (GPU, CPU) vs Arrow"
	@echo "make sanitize   ASan+UBSan build + every fuzz/fuzz_*.py harness (FUZZ_BUDGET, FUZZ_SECONDS, FUZZ_SEED)"
	@echo "make lint       ruff + clang-format checks;  make format  rewrites"
	@echo "make gpu-check  build, exactness and benchmarks on a GPU machine (scripts/gpu_check.sh)"
	@echo "make gpu-carry  wheels, prebuilt module and corpus a GPU-machine call carries (docs/contributing.md)"

setup:
	@bash scripts/setup.sh

build: setup

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/clang-format --dry-run -Werror $$(git ls-files 'backend_src/csrc/*.h' 'backend_src/csrc/*.cpp' 'backend_src/csrc/*.cu' 'backend_src/csrc/*.cuh' 'backend_src/bindings/*.cpp' 'bench/native/*.cpp' 'bench/native/*.cu' | grep -v unicode_tables.h)

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/clang-format -i $$(git ls-files 'backend_src/csrc/*.h' 'backend_src/csrc/*.cpp' 'backend_src/csrc/*.cu' 'backend_src/csrc/*.cuh' 'backend_src/bindings/*.cpp' 'bench/native/*.cpp' 'bench/native/*.cu' | grep -v unicode_tables.h)

test: setup lint audit sanitize-quick
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The fuzz harnesses under ASan+UBSan (fuzz/sanitize.sh). The long run: docs/security.md.
sanitize: setup
	bash fuzz/sanitize.sh

# What `make test` runs on every change: each harness for 20 s under the sanitizers (with the
# build, about 2-3 minutes on the 2-core CI machine).
sanitize-quick: setup
	FUZZ_BUDGET=$${FUZZ_BUDGET:-1000000} FUZZ_SECONDS=$${FUZZ_SECONDS:-20} bash fuzz/sanitize.sh

audit:
	bash scripts/audit.sh

test-e2e: setup
	$(PY) -m pytest -q -m e2e $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -q -m "not slow and not e2e" $(PYTEST_ARGS)

bench: setup
	$(PY) bench/bench_cpu.py --hf-max-mb 16

bench-quick: setup
	$(PY) bench/bench_cpu.py --quick

bench-corpus: setup
	$(PY) bench/bench_corpus.py

bench-corpus-quick: setup
	$(PY) bench/bench_corpus.py --quick --null

bench-parquet: setup
	$(PY) bench/bench_parquet.py

perf-inputs: setup
	$(PY) perf_analyzer_configs/make_inputs.py

perf-concurrency: setup
	$(PY) perf_analyzer_configs/concurrency_sweep.py $(PERF_ARGS)

perf-rate: setup
	$(PY) perf_analyzer_configs/rate_sweep.py $(PERF_ARGS)

perf-protocols: setup
	$(PY) perf_analyzer_configs/protocols.py $(PERF_ARGS)

perf-ensemble: setup
	$(PY) perf_analyzer_configs/ensemble.py $(PERF_ARGS)

perf-report: setup
	$(PY) perf_analyzer_configs/report.py

soak: setup
	$(PY) perf_analyzer_configs/soak.py $(SOAK_ARGS)


serve: setup
	$(PY) -m gputok.serve $(SERVE_ARGS)

gpu-check:
	bash scripts/gpu_check.sh

gpu-carry: setup
	bash scripts/gpu_carry.sh

unicode-tables: setup
	$(PY) backend_src/tools/gen_unicode_tables.py

gpt2-files: setup
	$(PY) backend_src/tools/regen_gpt2_files.py --out-dir .cache/gpt2

clean:
	rm -rf backend_src/build build/sanitize .cache/gpt2
