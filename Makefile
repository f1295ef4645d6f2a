# ppbench — a thin Makefile over CMake and scripts/.  `make help` lists the targets.
#
# Variables you may override:  make BUILD_DIR=build-dbg BUILD_TYPE=Debug JOBS=1 test
#   SANITIZE_TESTS  space-separated PPBENCH_SANITIZE values, each built in its own
#                   $(BUILD_DIR)-sanitize-<name> and tested by `make test`,
#                   e.g. SANITIZE_TESTS="address,undefined thread" (the default);
#                   SANITIZE_TESTS= skips them.
#   SWEEP_FLAGS     extra flags for scripts/sweep.py, e.g. SWEEP_FLAGS=--force to re-run
#                   points already recorded (needed after a schedule or simulator change).
#   BENCH_BACKEND   which measured sweep `make bench` runs after the theory sweep: gpu
#                   (benchmarks/sweeps/gpu.json, `ppbench run --backend cuda --virtual-devices D`,
#                   into results/gpu.jsonl/.csv) or cpu (benchmarks/sweeps/cpu.json into
#                   results/cpu.jsonl/.csv). Unset (the default), scripts/choose_bench_backend.sh
#                   chooses gpu when nvidia-smi lists a device and the built ppbench has CUDA and
#                   sees a GPU, else cpu; `make bench` prints which it chose and why.
#   POINT_TIMEOUT, GPU_POINT_TIMEOUT  seconds one CPU / GPU sweep point may take before it is
#                   recorded as an error row.

BUILD_DIR      ?= build
BUILD_TYPE     ?= Release
JOBS           ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_JOBS     ?= 2
# The executor is the threaded part: it runs under ThreadSanitizer and ASan+UBSan in
# `make test`. Only its targets are built there, to stay within CI's time.
SANITIZE_TESTS ?= thread address,undefined
SANITIZE_TARGETS ?= executor_tests
SANITIZE_TEST_REGEX ?= ^CpuExecutor
SWEEP_FLAGS    ?=
PYTHON         := .venv/bin/python
PPBENCH        ?= $(BUILD_DIR)/ppbench

RESULTS_DIR    := results
PLOTS_DIR      := plots
THEORY_SPEC    := benchmarks/sweeps/theory.json
THEORY         := $(RESULTS_DIR)/theory
PERF_DIR       := $(RESULTS_DIR)/perf
CPU_SPEC       := benchmarks/sweeps/cpu.json
CPU_RESULTS    := $(RESULTS_DIR)/cpu
GPU_SPEC       := benchmarks/sweeps/gpu.json
GPU_RESULTS    := $(RESULTS_DIR)/gpu
# Empty: chosen from the machine (scripts/choose_bench_backend.sh).
BENCH_BACKEND  ?=
# Seconds one measured point may take before it is recorded as an error row. A GPU point
# also draws billions of parameters on the host before its first step.
POINT_TIMEOUT  ?= 300
GPU_POINT_TIMEOUT ?= 900

# Measured timelines (plots/timeline_measured_<name>.png) and the memory figure: real
# `ppbench run` steps of the CPU sweep's transformer, at D=4, N=8.
MEASURED_WORKLOAD := --workload transformer --preset tiny-llama --layers 8 --hidden 128 --ffn 344 \
                     --heads 4 --kv-heads 2 --seq 64 --vocab 512 --microbatch-size 2 --dtype f32
MEASURED_DEVICES      := 4
MEASURED_MICROBATCHES := 8
MEASURED_TIMELINES    := 1f1b zb-h1 interleaved-1f1b dualpipev
MEASURED_MEMORY_SCHEDULES := gpipe,1f1b,zb-h1,zb-h2,zb-v,dualpipev

# Timeline figures: plots/timeline_<name>.png, all at D=4, N=8.
# <name> is a schedule name; TIMELINE_ARGS_<name> adds flags for it.
TIMELINE_DEVICES      := 4
TIMELINE_MICROBATCHES := 8
TIMELINES := gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zb-v chimera dualpipe dualpipev
TIMELINE_ARGS_interleaved-1f1b := --chunks 2

empty :=
space := $(empty) $(empty)
# name:flags pairs for the shell loop, spaces in flags written as '+'.
TIMELINE_SPECS = $(foreach t,$(TIMELINES),$(t):$(subst $(space),+,$(strip $(TIMELINE_ARGS_$(t)))))
CXX_SOURCES = $(shell git ls-files --cached --others --exclude-standard '*.cpp' '*.h' '*.hpp' '*.cu' '*.cuh' 2>/dev/null || \
                find schedules harness workloads benchmarks tests \
                  \( -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \))

# Quiet recursion, including the make that `cmake --build` runs.
MAKEFLAGS += --no-print-directory

.DEFAULT_GOAL := build
.PHONY: profile perf-cpu build deps configure test sanitize-tests bench bench-theory bench-cpu bench-gpu sweep plots \
        timelines measured-timelines bubble-plots memory-plots report perf format format-check clean distclean help \
        gpu-bundle

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

test: build  ## build, run ctest (GoogleTest + pytest), then the SANITIZE_TESTS builds
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

bench: build  ## theory sweep + GPU sweep if a GPU is usable, else CPU (BENCH_BACKEND=cpu|gpu forces); plots, report
	@choice=$$(BENCH_BACKEND='$(BENCH_BACKEND)' scripts/choose_bench_backend.sh '$(PPBENCH)') || exit 2; \
	backend=$${choice%%:*}; \
	echo "make bench: theory sweep, then the $$backend sweep: $${choice#*: }"; \
	$(MAKE) bench-theory bench-$$backend
	@$(MAKE) plots report

bench-theory: build  ## the theory sweep (ppbench simulate) into results/theory.jsonl/.csv
	$(PYTHON) scripts/sweep.py $(THEORY_SPEC) --ppbench $(PPBENCH) --out $(THEORY) $(SWEEP_FLAGS)

bench-cpu: build  ## the CPU sweep (real runs, benchmarks/sweeps/cpu.json) into results/cpu.jsonl/.csv
	$(PYTHON) scripts/sweep.py $(CPU_SPEC) --ppbench $(PPBENCH) --out $(CPU_RESULTS) \
	  --timeout $(POINT_TIMEOUT) $(SWEEP_FLAGS)

# Refuses (exit 2, one line) where ppbench cannot run on a GPU, rather than recording every
# point as a failure.
bench-gpu: build  ## the GPU sweep (--backend cuda --virtual-devices D, sweeps/gpu.json) into results/gpu.jsonl/.csv
	@BENCH_BACKEND=gpu scripts/choose_bench_backend.sh '$(PPBENCH)' >/dev/null
	$(PYTHON) scripts/sweep.py $(GPU_SPEC) --ppbench $(PPBENCH) --out $(GPU_RESULTS) \
	  --timeout $(GPU_POINT_TIMEOUT) $(SWEEP_FLAGS)

sweep: bench-theory  ## only the theory sweep (skips points already in results/theory.jsonl)

plots: timelines measured-timelines bubble-plots memory-plots  ## all figures into plots/

timelines: build  ## plots/timeline_<schedule>.png at D=4, N=8 (traces in plots/traces/)
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

measured-timelines: build  ## plots/timeline_measured_<schedule>.png: real CPU steps (transformer, D=4, N=8)
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

bubble-plots: deps  ## plots/bubble_*.png from results/theory.jsonl
	@if [ -f $(THEORY).jsonl ]; then \
	  $(PYTHON) scripts/plot_bubble.py $(THEORY).jsonl --out-dir $(PLOTS_DIR); \
	else echo "no $(THEORY).jsonl yet: run 'make bench' (or 'make sweep') first"; fi

memory-plots: deps  ## plots/memory_*.png, plots/bubble_measured_vs_predicted.png from results/cpu.jsonl (gpu.jsonl: plots/gpu/)
	@if [ -f $(CPU_RESULTS).jsonl ]; then \
	  $(PYTHON) scripts/plot_memory.py $(CPU_RESULTS).jsonl --out-dir $(PLOTS_DIR) \
	    --workload transformer --devices $(MEASURED_DEVICES) --microbatches $(MEASURED_MICROBATCHES) \
	    --schedules $(MEASURED_MEMORY_SCHEDULES); \
	else echo "no $(CPU_RESULTS).jsonl yet: run 'make bench' (or 'make bench-cpu') first"; fi
	@if [ -f $(GPU_RESULTS).jsonl ]; then \
	  $(PYTHON) scripts/plot_memory.py $(GPU_RESULTS).jsonl --out-dir $(PLOTS_DIR)/gpu \
	    --workload transformer --devices $(MEASURED_DEVICES) --microbatches $(MEASURED_MICROBATCHES) \
	    --schedules $(MEASURED_MEMORY_SCHEDULES); \
	fi

report: deps  ## results/REPORT.md from theory.jsonl + cpu.jsonl (and REPORT-gpu.md with gpu.jsonl)
	@if [ -f $(THEORY).jsonl ]; then \
	  $(PYTHON) scripts/report.py $(THEORY).jsonl --out $(RESULTS_DIR)/REPORT.md \
	    $$( [ -f $(CPU_RESULTS).jsonl ] && echo --measured $(CPU_RESULTS).jsonl ); \
	else echo "no $(THEORY).jsonl yet: run 'make bench' (or 'make sweep') first"; exit 1; fi
	@if [ -f $(GPU_RESULTS).jsonl ]; then \
	  $(PYTHON) scripts/report.py $(THEORY).jsonl --out $(RESULTS_DIR)/REPORT-gpu.md \
	    --measured $(GPU_RESULTS).jsonl; \
	fi

# Single runs on a shared 2-core machine vary by up to ~30% (results/perf/README.md), so a
# regression is flagged past PERF_THRESHOLD; tighten it on a quiet, dedicated machine.
PERF_THRESHOLD ?= 0.30

perf: build  ## schedule throughput (Google Benchmark) compared with results/perf/baseline.json
	@mkdir -p $(PERF_DIR)
	$(BUILD_DIR)/benchmarks/schedule_throughput --benchmark_out=$(PERF_DIR)/latest.json \
	  --benchmark_out_format=json
	$(PYTHON) scripts/compare_perf.py $(PERF_DIR)/baseline.json $(PERF_DIR)/latest.json \
	  --threshold $(PERF_THRESHOLD)

perf-cpu: build  ## the CPU backend's benchmarks: layer GFLOP/s, executor overhead, bubble fidelity
	@mkdir -p $(PERF_DIR)
	@set -e; for b in layer_flops executor_overhead bubble_fidelity; do \
	  echo "== $$b"; \
	  $(BUILD_DIR)/benchmarks/$$b --benchmark_out=$(PERF_DIR)/$$b.json --benchmark_out_format=json; \
	done

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

profile: build  ## nsys profile of a short GPU step (needs nsys and a GPU)
	@command -v nsys >/dev/null 2>&1 || { echo "make profile needs Nsight Systems: install the \
	nsight-systems package from NVIDIA's CUDA repository (it provides 'nsys'), then re-run"; exit 2; }
	@mkdir -p $(dir $(PROFILE_OUT))
	nsys profile --trace=cuda,nvtx --output $(PROFILE_OUT) --force-overwrite true \
	  $(PPBENCH) run $(PROFILE_ARGS)
	@echo "report: $(PROFILE_OUT).nsys-rep (open it in Nsight Systems; NVTX domain 'ppbench')"

format:  ## clang-format -i every C++/CUDA source
	clang-format -i $(CXX_SOURCES)

format-check:  ## fail if any C++/CUDA source is not clang-formatted
	clang-format --dry-run -Werror $(CXX_SOURCES)

clean:  ## remove $(BUILD_DIR) and the sanitizer build dirs
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-sanitize-*

distclean: clean  ## clean, and remove the .venv too
	rm -rf .venv
