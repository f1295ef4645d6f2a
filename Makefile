# ppbench — a thin Makefile over CMake and scripts/.  `make help` lists the targets.
#
# Variables you may override:  make BUILD_DIR=build-dbg BUILD_TYPE=Debug JOBS=1 test
#   SANITIZE_TESTS  space-separated PPBENCH_SANITIZE values, each built in its own
#                   $(BUILD_DIR)-sanitize-<name> and tested by `make test`,
#                   e.g. SANITIZE_TESTS="thread address,undefined" (the default);
#                   SANITIZE_TESTS= skips them.
#   SWEEP_FLAGS     extra flags for scripts/sweep.py, e.g. SWEEP_FLAGS=--force to re-run
#                   points already recorded by this ppbench build on this machine (a sweep
#                   never resumes from records of another commit, build or machine).
#   BENCH_BACKEND   which measured sweep `make bench` runs after the theory sweep: cuda
#                   (benchmarks/sweeps/cuda.json, `ppbench run --backend cuda --virtual-devices D`,
#                   into results/latest/cuda.jsonl/.csv) or cpu (benchmarks/sweeps/cpu.json into
#                   results/latest/cpu.jsonl/.csv). Unset (the default), scripts/choose_bench_backend.sh
#                   chooses cuda when nvidia-smi lists a device and the built ppbench has CUDA and
#                   sees a GPU, else cpu; `make bench` prints which it chose and why.
#   POINT_TIMEOUT, GPU_POINT_TIMEOUT  seconds one CPU / GPU sweep point may take before it is
#                   recorded as an error row.

BUILD_DIR      ?= build
BUILD_TYPE     ?= Release
JOBS           ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_JOBS     ?= 2
# The executor is the threaded part: it runs under ThreadSanitizer and ASan+UBSan in
# `make test`, and so do the schedule-file fuzz corpora (tests/fuzz/). Only their targets are
# built there, to stay within CI's time.
SANITIZE_TESTS ?= thread address,undefined
SANITIZE_TARGETS ?= executor_tests fuzz_replay_schedule_file fuzz_replay_schedule_edits
SANITIZE_TEST_REGEX ?= ^CpuExecutor|^fuzz_corpus_schedule
FUZZ_SECONDS   ?= 60
SWEEP_FLAGS    ?=
PYTHON         := .venv/bin/python
PPBENCH        ?= $(BUILD_DIR)/ppbench

RESULTS_DIR    := results
# make bench writes only git-ignored files (docs/bench.md): this machine's records and report in
# LATEST_DIR, its figures in PLOTS_DIR; the committed reference records stay in REFERENCE_DIR
# (results/REPORT.md and plots/reference/ are made from them) and are never taken for a run.
LATEST_DIR     := $(RESULTS_DIR)/latest
REFERENCE_DIR  := $(RESULTS_DIR)/reference
PLOTS_DIR      := plots/latest
REPORT         := $(LATEST_DIR)/REPORT.md
# The same report as one self-contained page, figures inline (scripts/report_html.py).
REPORT_HTML    := $(LATEST_DIR)/REPORT.html
# Figures the report shows: this machine's (PLOTS_DIR) first, else the committed ones.
REFERENCE_PLOTS := plots/reference
CUDA_REPORT     := $(LATEST_DIR)/REPORT-cuda.md
THEORY_SPEC    := benchmarks/sweeps/theory.json
THEORY         := $(LATEST_DIR)/theory
PERF_DIR       := $(RESULTS_DIR)/perf
CPU_SPEC       := benchmarks/sweeps/cpu.json
CPU_RESULTS    := $(LATEST_DIR)/cpu
CUDA_SPEC       := benchmarks/sweeps/cuda.json
CUDA_RESULTS    := $(LATEST_DIR)/cuda
# make bench-mpi: benchmarks/mpi_transport.py's record (results/perf/README.md, "The multi-process
# transport"); MPI_BENCH_FLAGS adds options, e.g. MPI_BENCH_FLAGS="--repeats 5 --only latency".
MPI_BENCH_RESULTS := $(LATEST_DIR)/mpi_transport.json
MPI_BENCH_FLAGS   ?=
# make bench-link: the records of benchmarks/allreduce_link.py and pipeline_link.py (docs/bench.md,
# "Across emulated nodes"); LINK_BENCH_FLAGS and PIPELINE_LINK_FLAGS add options to each, e.g.
# LINK_BENCH_FLAGS="--rate 100mbit" PIPELINE_LINK_FLAGS="--rate 100mbit --schedules 1f1b".
LINK_BENCH_RESULTS     := $(LATEST_DIR)/allreduce_link.json
LINK_BENCH_FLAGS       ?=
PIPELINE_LINK_RESULTS  := $(LATEST_DIR)/pipeline_link.json
PIPELINE_LINK_FLAGS    ?=
# Schedule order and names for the plots and the report: `ppbench list --format json` once it is
# built (else the scripts use the order in the data).
PPBENCH_LIST   = $(if $(wildcard $(PPBENCH)),--ppbench $(PPBENCH))
# Empty: chosen from the machine (scripts/choose_bench_backend.sh).
BENCH_BACKEND  ?=
# Seconds one measured point may take before it is recorded as an error row. A GPU point
# also draws billions of parameters on the host before its first step.
POINT_TIMEOUT  ?= 300
GPU_POINT_TIMEOUT ?= 900

# Measured timelines (plots/latest/timeline_measured_<name>.png) and the memory figure: real
# `ppbench run` steps of the CPU sweep's transformer, at D=4, N=8.
MEASURED_WORKLOAD := --workload transformer --preset tiny-llama --layers 8 --hidden 128 --ffn 344 \
                     --heads 4 --kv-heads 2 --seq 64 --vocab 512 --microbatch-size 2 --dtype f32
MEASURED_DEVICES      := 4
MEASURED_MICROBATCHES := 8
MEASURED_TIMELINES    := 1f1b zb-h1 interleaved-1f1b dualpipev
MEASURED_MEMORY_SCHEDULES := gpipe,1f1b,zb-h1,zb-h2,zb-v,dualpipev

# Timeline figures: plots/latest/timeline_<name>.png, all at D=4, N=8.
# <name> is a schedule name; TIMELINE_ARGS_<name> adds flags for it.
TIMELINE_DEVICES      := 4
TIMELINE_MICROBATCHES := 8
TIMELINES := gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zb-v chimera dualpipe dualpipev
TIMELINE_ARGS_interleaved-1f1b := --chunks 2

empty :=
space := $(empty) $(empty)
# name:flags pairs for the shell loop, spaces in flags written as '+'.
TIMELINE_SPECS = $(foreach t,$(TIMELINES),$(t):$(subst $(space),+,$(strip $(TIMELINE_ARGS_$(t)))))
# (wildcard drops files deleted in the work tree but not yet from git's index.)
CXX_SOURCES = $(wildcard $(shell git ls-files --cached --others --exclude-standard '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' 2>/dev/null || \
                find core schedules harness workloads benchmarks tests \
                  \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \)))

# The scripts format-check lints: pyflakes (mistakes: unused or undefined names) and pycodestyle
# (layout, 100 columns like the C++) for Python, shellcheck's warnings for shell.
PY_SOURCES = $(wildcard $(shell git ls-files --cached --others --exclude-standard '*.py' 2>/dev/null))
# pycodestyle with its default checks at 100 columns; an import that must follow sys.path or
# matplotlib.use() says so with `# noqa: E402`.
PYCODESTYLE = pycodestyle --max-line-length=100
SH_SOURCES = $(wildcard $(shell git ls-files --cached --others --exclude-standard '*.sh' 2>/dev/null) .ci/run)

# Quiet recursion, including the make that `cmake --build` runs.
MAKEFLAGS += --no-print-directory

.DEFAULT_GOAL := build
.PHONY: profile perf-cpu build deps configure test sanitize-tests bench bench-theory bench-cpu bench-cuda bench-mpi sweep plots \
        timelines measured-timelines bubble-plots memory-plots report report-gpu perf format format-check clean \
        distclean help gpu-bundle fuzz bench-link

help:  ## list the targets
	@echo "ppbench make targets (BUILD_DIR=$(BUILD_DIR), BUILD_TYPE=$(BUILD_TYPE), JOBS=$(JOBS)):"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):.*## (.*)/  \1\t\2/' | expand -t 18

deps:  ## install missing Debian packages and the .venv (no-op when all present)
	@scripts/install-deps.sh --check >/dev/null 2>&1 || scripts/install-deps.sh

# (Re)configure when there is no cache yet, or when the venv changed since the last
# configure (tests/CMakeLists.txt registers the pytest test only if .venv exists).
configure: deps
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ] || [ .venv/.deps-stamp -nt $(BUILD_DIR)/CMakeCache.txt ]; then \
	  echo "cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)"; \
	  cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE); \
	fi

build: configure  ## configure (CMake, Release) and build into $(BUILD_DIR)
	cmake --build $(BUILD_DIR) -j$(JOBS)

# format-check first: a layout or lint failure is told before a build of many minutes.
test: format-check build  ## format-check, build, run ctest (GoogleTest + pytest), then the SANITIZE_TESTS builds
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(CTEST_JOBS)
	@$(MAKE) sanitize-tests

sanitize-tests:  ## build and ctest each PPBENCH_SANITIZE value in SANITIZE_TESTS
	@set -e; for san in $(SANITIZE_TESTS); do \
	  dir="$(BUILD_DIR)-sanitize-$$(echo $$san | tr ',' '-')"; \
	  echo "== sanitizer build '$$san' in $$dir"; \
	  cmake -S . -B "$$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPPBENCH_SANITIZE="$$san" \
	        -DPPBENCH_BUILD_BENCHMARKS=OFF; \
	  cmake --build "$$dir" -j$(JOBS) --target $(SANITIZE_TARGETS); \
	  ctest --test-dir "$$dir" --output-on-failure -j$(CTEST_JOBS) -R '$(SANITIZE_TEST_REGEX)'; \
	done

bench: build  ## theory sweep + CUDA sweep if a GPU is usable, else CPU (BENCH_BACKEND=cpu|cuda forces); plots, report, summary (docs/bench.md)
	@choice=$$(BENCH_BACKEND='$(BENCH_BACKEND)' scripts/choose_bench_backend.sh '$(PPBENCH)') || exit $$?; \
	backend=$${choice%%:*}; \
	echo "make bench: theory sweep, then the $$backend sweep: $${choice#*: }"; \
	$(MAKE) bench-theory bench-$$backend
	@$(MAKE) plots report
	@backend=$$(BENCH_BACKEND='$(BENCH_BACKEND)' scripts/choose_bench_backend.sh '$(PPBENCH)' | cut -d: -f1); \
	if [ "$$backend" = cuda ]; then measured=$(CUDA_RESULTS); reports="--report $(CUDA_REPORT)"; \
	else measured=$(CPU_RESULTS); reports=""; fi; \
	$(PYTHON) scripts/sweep.py --summarize $(THEORY) $$measured --report $(REPORT) $$reports \
	  --report "results/REPORT.md (the committed reference, from $(REFERENCE_DIR)/)" \
	  --figures "$(PLOTS_DIR)/ (committed reference figures: plots/reference/)"

bench-theory: build  ## the theory sweep (ppbench simulate) into results/latest/theory.jsonl/.csv
	$(PYTHON) scripts/sweep.py $(THEORY_SPEC) --ppbench $(PPBENCH) --out $(THEORY) $(SWEEP_FLAGS)

bench-cpu: build  ## the CPU sweep (real runs, benchmarks/sweeps/cpu.json) into results/latest/cpu.jsonl/.csv
	$(PYTHON) scripts/sweep.py $(CPU_SPEC) --ppbench $(PPBENCH) --out $(CPU_RESULTS) \
	  --timeout $(POINT_TIMEOUT) $(SWEEP_FLAGS)

# Refuses (exit 3, one line) where ppbench cannot run on a GPU, rather than recording every
# point as a failure.
bench-cuda: build  ## the GPU sweep (--backend cuda --virtual-devices D, sweeps/cuda.json) into results/latest/cuda.jsonl/.csv
	@BENCH_BACKEND=cuda scripts/choose_bench_backend.sh '$(PPBENCH)' >/dev/null
	$(PYTHON) scripts/sweep.py $(CUDA_SPEC) --ppbench $(PPBENCH) --out $(CUDA_RESULTS) \
	  --timeout $(GPU_POINT_TIMEOUT) $(SWEEP_FLAGS)

# Threads against processes on this machine: per-message hand-over at 64 B, 64 KiB and 4 MiB, and
# the replay's bubble gap at D = 2 (about 4 minutes on 2 cores; it refuses, exit 3, without
# mpirun or a ppbench built with MPI).
bench-mpi: build  ## MPI transport vs in-process mailboxes: hand-over latency, bubble gap (results/latest/mpi_transport.json)
	$(PYTHON) benchmarks/mpi_transport.py --ppbench $(PPBENCH) --out $(MPI_BENCH_RESULTS) $(MPI_BENCH_FLAGS)

# Across emulated nodes (a network namespace each, a shaped link): data-parallel all-reduces
# beside the simulator's ring formula for that link, then a pipeline's hand-overs by each of
# OpenMPI's ways to carry them (about four minutes; root; exit 3 where network namespaces cannot
# be made).
bench-link: build  ## all-reduces vs the ring formula, and pipeline hand-overs, across emulated nodes on a 1 Gbit/s link (results/latest/{allreduce,pipeline}_link.json)
	$(PYTHON) benchmarks/allreduce_link.py --ppbench $(PPBENCH) --out $(LINK_BENCH_RESULTS) $(LINK_BENCH_FLAGS)
	$(PYTHON) benchmarks/pipeline_link.py --ppbench $(PPBENCH) --out $(PIPELINE_LINK_RESULTS) $(PIPELINE_LINK_FLAGS)

sweep: bench-theory  ## only the theory sweep (skips points this ppbench already recorded here)

plots: timelines measured-timelines bubble-plots memory-plots  ## all figures into plots/latest/

timelines: build  ## plots/latest/timeline_<schedule>.png at D=4, N=8 (traces in plots/latest/traces/)
	@mkdir -p $(PLOTS_DIR)/traces
	@set -e; for spec in $(TIMELINE_SPECS); do \
	  name=$${spec%%:*}; extra=$$(echo "$${spec#*:}" | tr '+' ' '); \
	  trace=$(PLOTS_DIR)/traces/$$name.json; \
	  cmd="$(PPBENCH) simulate --schedule $$name --devices $(TIMELINE_DEVICES) --microbatches $(TIMELINE_MICROBATCHES) $$extra --trace-out $$trace --format json"; \
	  echo "$$cmd"; rc=0; $$cmd >/dev/null || rc=$$?; \
	  if [ $$rc -eq 2 ]; then echo "  skipped: $$name is not valid at D=$(TIMELINE_DEVICES), N=$(TIMELINE_MICROBATCHES)"; continue; fi; \
	  if [ $$rc -ne 0 ]; then echo "  ppbench failed for $$name (exit $$rc)"; exit $$rc; fi; \
	  $(PYTHON) scripts/plot_timeline.py $$trace --out $(PLOTS_DIR)/timeline_$$name.png; \
	done

measured-timelines: build  ## plots/latest/timeline_measured_<schedule>.png: real CPU steps (transformer, D=4, N=8)
	@mkdir -p $(PLOTS_DIR)/traces
	@set -e; for name in $(MEASURED_TIMELINES); do \
	  trace=$(PLOTS_DIR)/traces/measured_$$name.json; \
	  cmd="$(PPBENCH) run --backend cpu $(MEASURED_WORKLOAD) --schedule $$name --devices $(MEASURED_DEVICES) --microbatches $(MEASURED_MICROBATCHES) --steps 1 --warmup 1 --trace-out $$trace --format json"; \
	  echo "$$cmd"; rc=0; $$cmd >/dev/null || rc=$$?; \
	  if [ $$rc -eq 2 ]; then echo "  skipped: $$name is not valid at D=$(MEASURED_DEVICES), N=$(MEASURED_MICROBATCHES)"; continue; fi; \
	  if [ $$rc -ne 0 ]; then echo "  ppbench run failed for $$name (exit $$rc)"; exit $$rc; fi; \
	  $(PYTHON) scripts/plot_timeline.py $$trace --out $(PLOTS_DIR)/timeline_measured_$$name.png \
	    --label "transformer $$name D=$(MEASURED_DEVICES) N=$(MEASURED_MICROBATCHES)"; \
	done

bubble-plots: deps  ## plots/latest/bubble_*.png from results/latest/theory.jsonl
	@if [ -f $(THEORY).jsonl ]; then \
	  $(PYTHON) scripts/plot_bubble.py $(THEORY).jsonl --out-dir $(PLOTS_DIR) $(PPBENCH_LIST); \
	else echo "no $(THEORY).jsonl yet: run 'make bench' (or 'make sweep') first"; fi

memory-plots: deps  ## plots/latest/memory_*.png, bubble_measured_vs_predicted.png from results/latest/cpu.jsonl (cuda.jsonl: plots/latest/cuda/)
	@if [ -f $(CPU_RESULTS).jsonl ]; then \
	  $(PYTHON) scripts/plot_memory.py $(CPU_RESULTS).jsonl --out-dir $(PLOTS_DIR) \
	    --workload transformer --devices $(MEASURED_DEVICES) --microbatches $(MEASURED_MICROBATCHES) \
	    --schedules $(MEASURED_MEMORY_SCHEDULES) $(PPBENCH_LIST); \
	else echo "no $(CPU_RESULTS).jsonl yet: run 'make bench' (or 'make bench-cpu') first"; fi
	@if [ -f $(CUDA_RESULTS).jsonl ]; then \
	  $(PYTHON) scripts/plot_memory.py $(CUDA_RESULTS).jsonl --out-dir $(PLOTS_DIR)/cuda \
	    --workload transformer --devices $(MEASURED_DEVICES) --microbatches $(MEASURED_MICROBATCHES) \
	    --schedules $(MEASURED_MEMORY_SCHEDULES) $(PPBENCH_LIST); \
	fi

# The report of the latest records sets them beside the committed ones in $(REFERENCE_DIR).
report: deps  ## results/latest/REPORT.md and REPORT.html (by paper, figures inline) from latest theory + cpu records beside results/reference/ (REPORT-cuda.md with cuda.jsonl)
	@if [ -f $(THEORY).jsonl ]; then \
	  $(PYTHON) scripts/report.py $(THEORY).jsonl --out $(REPORT) $(PPBENCH_LIST) \
	    $$( [ -f $(REFERENCE_DIR)/theory.jsonl ] && echo --reference $(REFERENCE_DIR)/theory.jsonl ) \
	    $$( [ -f $(CPU_RESULTS).jsonl ] && echo --measured $(CPU_RESULTS).jsonl ) \
	    $$( [ -f $(REFERENCE_DIR)/cpu.jsonl ] && echo --reference-measured $(REFERENCE_DIR)/cpu.jsonl ) \
	    $$( [ -f $(REFERENCE_DIR)/zb_table5.json ] && echo --zb-table5 $(REFERENCE_DIR)/zb_table5.json ) \
	    $$( [ -f $(REFERENCE_DIR)/dp_scaling.json ] && echo --dp-scaling $(REFERENCE_DIR)/dp_scaling.json ) \
	    $$( [ -f $(REFERENCE_DIR)/gpipe_tables.json ] && echo --gpipe-tables $(REFERENCE_DIR)/gpipe_tables.json ) \
	    $$( [ -f $(REFERENCE_DIR)/dualpipe_measured.json ] && echo --dualpipe-measured $(REFERENCE_DIR)/dualpipe_measured.json ) \
	    --figures $(PLOTS_DIR) --figures $(REFERENCE_PLOTS) --html $(REPORT_HTML); \
	else echo "no $(THEORY).jsonl yet: run 'make bench' (or 'make sweep') first"; exit 1; fi
	@if [ -f $(CUDA_RESULTS).jsonl ]; then \
	  $(PYTHON) scripts/report.py $(THEORY).jsonl --out $(CUDA_REPORT) $(PPBENCH_LIST) \
	    $$( [ -f $(REFERENCE_DIR)/theory.jsonl ] && echo --reference $(REFERENCE_DIR)/theory.jsonl ) \
	    --measured $(CUDA_RESULTS).jsonl \
	    $$( [ -f $(REFERENCE_DIR)/cuda.jsonl ] && echo --reference-measured $(REFERENCE_DIR)/cuda.jsonl ) \
	    $$( [ -f $(REFERENCE_DIR)/zb_table5.json ] && echo --zb-table5 $(REFERENCE_DIR)/zb_table5.json ) \
	    --figures $(PLOTS_DIR)/cuda --figures $(PLOTS_DIR) --figures $(REFERENCE_PLOTS) \
	    --html $(CUDA_REPORT:.md=.html); \
	fi

# The GPU sweep's records, brought home from GPU machines (scripts/gpu-check.sh's sweep part,
# docs/gpu-check.md): every results/gpu/<gpu>-<date>/sweep/cuda.jsonl, oldest call first (a point
# run again later replaces the earlier row), beside the committed theory; GPU_SWEEPS names others.
GPU_REPORT  := $(RESULTS_DIR)/REPORT-gpu.md
GPU_PLOTS   := plots/gpu
GPU_SWEEPS  ?= $(shell ls $(RESULTS_DIR)/gpu/*/sweep/cuda.jsonl 2>/dev/null \
                 | sed -E 's|.*-([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{6}Z)/sweep/cuda.jsonl$$|\1 &|' \
                 | sort | cut -d' ' -f2)
report-gpu: deps  ## results/REPORT-gpu.md and plots/gpu/ from the GPU sweeps under results/gpu/*/sweep/ (docs/gpu-check.md)
	@[ -n "$(strip $(GPU_SWEEPS))" ] || { echo "report-gpu: no $(RESULTS_DIR)/gpu/*/sweep/cuda.jsonl yet: run scripts/gpu-check.sh --only sweep on a GPU machine (docs/gpu-check.md)" >&2; exit 2; }
	$(PYTHON) scripts/plot_memory.py $(GPU_SWEEPS) --out-dir $(GPU_PLOTS) --workload transformer \
	  --devices $(MEASURED_DEVICES) --microbatches 32 $(PPBENCH_LIST)
	$(PYTHON) scripts/report.py $(REFERENCE_DIR)/theory.jsonl --out $(GPU_REPORT) $(PPBENCH_LIST) \
	  --title "ppbench results on a GPU" $(foreach f,$(GPU_SWEEPS),--measured $(f)) --figures $(GPU_PLOTS) --figures $(REFERENCE_PLOTS)

# Single runs on a shared 2-core machine vary by up to ~30% (results/perf/README.md), so a
# regression is flagged past PERF_THRESHOLD; tighten it on a quiet, dedicated machine.
# PERF_FAIL=1 makes `make perf` and `make perf-ci` fail on a regression (default: report only).
PERF_THRESHOLD ?= 0.30
PERF_FAIL      ?= 0

# The committed results/perf/baseline.json predates the calibration benchmarks (see perf-ci):
# raw times, meaningful only on the machine that made it.
perf: build  ## schedule throughput (Google Benchmark, full run) compared with results/perf/baseline.json
	@mkdir -p $(PERF_DIR)
	$(BUILD_DIR)/benchmarks/schedule_throughput --benchmark_out=$(PERF_DIR)/latest.json \
	  --benchmark_out_format=json
	$(PYTHON) scripts/compare_perf.py $(PERF_DIR)/baseline.json $(PERF_DIR)/latest.json \
	  --raw --threshold $(PERF_THRESHOLD) $(if $(filter 1,$(PERF_FAIL)),--fail-on-regression)

perf-cpu: build  ## the CPU backend's benchmarks: layer GFLOP/s, executor overhead, bubble fidelity, optimizer step
	@mkdir -p $(PERF_DIR)
	@set -e; for b in layer_flops executor_overhead bubble_fidelity optimizer_step; do \
	  echo "== $$b"; \
	  $(BUILD_DIR)/benchmarks/$$b --benchmark_out=$(PERF_DIR)/$$b.json --benchmark_out_format=json; \
	done

# make perf-ci (docs/perf-ci.md): a quick mode of the CPU benchmark programs for CI, about a
# minute on 2 cores. Each program runs a representative subset (PERF_CI_FILTER_<program>),
# PERF_CI_REPETITIONS randomly interleaved repetitions (PERF_CI_REPETITIONS_<program> where set)
# of PERF_CI_MIN_TIME seconds each, with its calibration benchmarks (BM_Calibration/*) in the
# same run, into $(PERF_CI_DIR)/latest-<program>.json: Google Benchmark JSON, the commit in its
# context.
# scripts/compare_perf.py divides every time by its own run's calibration, runs Google Benchmark's
# compare.py on the normalised copies of baseline and latest, and reports each benchmark whose
# normalised median is more than PERF_CI_THRESHOLD (PERF_CI_THRESHOLD_<program> where set) slower;
# PERF_FAIL=1 then fails.
# make perf-ci-baseline (= PERF_BASELINE=1 make perf-ci) writes
# $(PERF_CI_BASELINE_DIR)/baseline-<program>.json instead, to commit; PERF_CI_BASELINE_DIR keeps
# one set per runner type. PERF_CI_RUNNER labels the runs (default: the host name).
PERF_CI_DIR          ?= $(PERF_DIR)/ci
PERF_CI_BASELINE_DIR ?= $(PERF_CI_DIR)
PERF_CI_PROGRAMS     ?= schedule_throughput layer_flops executor_overhead bubble_fidelity
PERF_CI_REPETITIONS  ?= 9
PERF_CI_MIN_TIME     ?= 0.03
# A bubble_fidelity repetition is one whole pipelined training step (~1.5 s with its warm-up).
PERF_CI_REPETITIONS_bubble_fidelity ?= 5
PERF_CI_THRESHOLD    ?= 0.25
# Two threads on a shared machine: hand-overs wait for time slices when other work holds the cores.
PERF_CI_THRESHOLD_executor_overhead ?= 0.5
PERF_CI_THRESHOLD_bubble_fidelity   ?= 0.3
# The calibration benchmarks (BM_Calibration/<name>) every time is divided by: the geometric mean of
# both, which followed a shared machine's swings best (docs/perf-ci.md, "Thresholds and noise").
PERF_CI_CALIBRATION  ?= compute,memory
PERF_CI_RUNNER       ?=
PERF_BASELINE        ?= 0
PERF_CI_FILTER_schedule_throughput ?= ^BM_Calibration/|^BM_Pipeline/[^/]+/D64/N1024|^BM_Pipeline/(1f1b|zb-v)/D16/|^BM_Phase/[^/]+/1f1b/
PERF_CI_FILTER_layer_flops         ?= ^BM_Calibration/|^BM_GemmPeak/f32/1024/|^BM_Layer/(linear_1024|attention_gqa|llama_decoder|conv3x3)/f32/
PERF_CI_FILTER_executor_overhead   ?= ^BM_Calibration/|^BM_ThreadSpawn/D2|^BM_Executor/(1f1b|zb-h1|interleaved-1f1b)/D2/N(32|128)/
PERF_CI_FILTER_bubble_fidelity     ?= ^BM_Calibration/|^BM_Fidelity/(1f1b|zb-h1)/D2/

perf_ci_reps = $(or $(PERF_CI_REPETITIONS_$(1)),$(PERF_CI_REPETITIONS))
perf_ci_json = $(if $(filter 1,$(PERF_BASELINE)),$(PERF_CI_BASELINE_DIR)/baseline-$(1).json,$(PERF_CI_DIR)/latest-$(1).json)
# One program's quick run: console output to its .log, the JSON written to .tmp and moved into
# place only when the program succeeds.
perf_ci_run = t0=$$(date +%s); out='$(call perf_ci_json,$(1))'; log='$(PERF_CI_DIR)/$(1).log'; \
  if $(BUILD_DIR)/benchmarks/$(1) --benchmark_filter='$(PERF_CI_FILTER_$(1))' \
       --benchmark_min_time=$(PERF_CI_MIN_TIME) --benchmark_repetitions=$(call perf_ci_reps,$(1)) \
       --benchmark_enable_random_interleaving=true --benchmark_display_aggregates_only=true \
       --benchmark_context="$$context,repetitions=$(call perf_ci_reps,$(1))" \
       --benchmark_out="$$out.tmp" --benchmark_out_format=json \
       >"$$log" 2>&1; then mv "$$out.tmp" "$$out"; \
  else rc=$$?; tail -n 20 "$$log"; echo "perf-ci: $(1) failed (exit $$rc), output in $$log"; exit $$rc; fi; \
  echo "perf-ci: $(1): $$(($$(date +%s) - t0)) s -> $$out";

.PHONY: perf-ci perf-ci-baseline
perf-ci: configure  ## quick CPU benchmarks (about a minute on 2 cores), calibration-normalised, vs results/perf/ci baselines (PERF_FAIL=1 fails on a regression)
	cmake --build $(BUILD_DIR) -j$(JOBS) --target $(PERF_CI_PROGRAMS)
	@mkdir -p $(PERF_CI_DIR) $(PERF_CI_BASELINE_DIR)
	@set -e; \
	commit=$$(git rev-parse HEAD 2>/dev/null || echo "$${PPBENCH_GIT_COMMIT:-unknown}"); \
	modified=unknown; if status=$$(git status --porcelain --untracked-files=no -- . ':!results' 2>/dev/null); \
	then modified=no; [ -z "$$status" ] || modified=yes; fi; \
	runner='$(PERF_CI_RUNNER)'; [ -n "$$runner" ] || runner=$$(hostname 2>/dev/null || echo unknown); \
	context="commit=$$commit,commit_modified=$$modified,perf_mode=ci-quick,runner=$$runner"; \
	context="$$context,min_time=$(PERF_CI_MIN_TIME)"; \
	echo "perf-ci: $(PERF_CI_PROGRAMS); $(PERF_CI_REPETITIONS) repetitions of $(PERF_CI_MIN_TIME) s; commit $$commit (load average $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null))"; \
	$(foreach p,$(PERF_CI_PROGRAMS),$(call perf_ci_run,$(p)))
ifeq ($(PERF_BASELINE),1)
	@echo "perf-ci: baselines written to $(PERF_CI_BASELINE_DIR)/baseline-*.json: commit them"
else
	$(PYTHON) scripts/compare_perf.py \
	  $(foreach p,$(PERF_CI_PROGRAMS),$(PERF_CI_BASELINE_DIR)/baseline-$(p).json $(PERF_CI_DIR)/latest-$(p).json) \
	  --threshold $(PERF_CI_THRESHOLD) --calibration $(PERF_CI_CALIBRATION) \
	  --normalised-dir $(PERF_CI_DIR)/normalised \
	  $(foreach p,$(PERF_CI_PROGRAMS),$(if $(PERF_CI_THRESHOLD_$(p)),--threshold-for $(p)=$(PERF_CI_THRESHOLD_$(p)))) \
	  $(if $(filter 1,$(PERF_FAIL)),--fail-on-regression)
endif

perf-ci-baseline:  ## perf-ci's quick run written as the baselines results/perf/ci/baseline-*.json (commit them)
	@$(MAKE) perf-ci PERF_BASELINE=1

# Portable GPU binaries for a machine that can build nothing: built here (nvcc, no GPU needed) in
# $(BUNDLE_BUILD_DIR), collected with a launcher in $(BUNDLE_DIR) (docs/gpu-check.md). Run there
# as `bash scripts/gpu-check.sh --bundle $(BUNDLE_DIR) --out DIR --only PARTS`.
BUNDLE_DIR       ?= gpu-bundle
BUNDLE_BUILD_DIR ?= build-bundle

gpu-bundle: deps  ## portable GPU programs + launcher in gpu-bundle/ (no GPU needed) for scripts/gpu-check.sh --bundle
	scripts/gpu-bundle.sh --out $(BUNDLE_DIR) --build-dir $(BUNDLE_BUILD_DIR) --jobs $(JOBS)

# A short pipelined step on the GPU under Nsight Systems (NVTX ranges on every action/transfer).
PROFILE_ARGS ?= --backend cuda --virtual-devices 2 --workload transformer --preset tiny-llama \
                --schedule 1f1b --devices 2 --microbatches 8 --dtype bf16 --steps 2 --warmup 1
PROFILE_OUT  ?= results/profile/ppbench-$(shell date +%Y%m%d-%H%M%S)
# The program that makes CUDA runs (ppbench hands them to it by exec), profiled directly so that
# the profiler's process is the one that runs the kernels from its first instruction.
PPBENCH_CUDA ?= $(dir $(PPBENCH))ppbench-cuda

profile: build  ## nsys profile of a short GPU step (needs nsys and a GPU)
	@command -v nsys >/dev/null 2>&1 || { echo "make profile needs Nsight Systems: install the \
	nsight-systems package from NVIDIA's CUDA repository (it provides 'nsys'), then re-run"; exit 2; }
	@test -x $(PPBENCH_CUDA) || { echo "make profile: no $(PPBENCH_CUDA): this build has no \
	CUDA backend (configure where nvcc is found, then make)"; exit 3; }
	@mkdir -p $(dir $(PROFILE_OUT))
	nsys profile --trace=cuda,nvtx --output $(PROFILE_OUT) --force-overwrite true \
	  $(PPBENCH_CUDA) run $(PROFILE_ARGS)
	@echo "report: $(PROFILE_OUT).nsys-rep (open it in Nsight Systems; NVTX domain 'ppbench')"

fuzz:  ## search the input parsers for FUZZ_SECONDS each (clang, libFuzzer, ASan+UBSan; docs/testing.md)
	scripts/fuzz.sh $(FUZZ_SECONDS)

format:  ## clang-format -i every C++/CUDA source
	clang-format -i $(CXX_SOURCES)

format-check: deps  ## fail if a C++/CUDA source is not clang-formatted or a script fails its linters (part of make test)
	@clang-format --dry-run -Werror $(CXX_SOURCES) && echo "format-check: $(words $(CXX_SOURCES)) C++/CUDA files clean"
	@pyflakes3 $(PY_SOURCES) && $(PYCODESTYLE) $(PY_SOURCES) && \
	  echo "format-check: $(words $(PY_SOURCES)) Python files clean (pyflakes, pycodestyle)"
	@shellcheck -S warning $(SH_SOURCES) && echo "format-check: $(words $(SH_SOURCES)) shell scripts clean (shellcheck)"

clean:  ## remove $(BUILD_DIR) and the sanitizer build dirs
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-sanitize-*

distclean: clean  ## clean, and remove the .venv too
	rm -rf .venv
