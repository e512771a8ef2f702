#!/usr/bin/env bash
# The CUDA-torch tier (`make test-cuda-torch`): builds against a CUDA build of torch.
#
# Makes a separate venv (default .venv-cuda, git-ignored; ~4.7 GB) with torch 2.13.0+cu130 from
# PyPI and the nvidia-* wheels it depends on, installs this checkout into it (editable), and runs
# tests/cuda_torch (torch's CUDA APIs: c10_cuda/torch_cuda linked, cuBLAS headers from the
# wheels) plus tests/test_cuda_build.py against that torch. Needs nvcc 13.x; no GPU.
#
#   PYTHON=python3.11 tests/cuda_torch/run.sh [pytest args...]
#   CUDA_VENV=/path/venv CUDA_TORCH='torch===2.13.0' tests/cuda_torch/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
VENV=${CUDA_VENV:-.venv-cuda}
# '===' is exact string equality: PyPI's torch 2.13.0 (its version.py says 2.13.0+cu130), never a
# local '2.13.0+cpu' wheel, which '==2.13.0' would prefer.
TORCH_REQ=${CUDA_TORCH:-torch===2.13.0}
PY="$VENV/bin/python"
started=$(date +%s)

if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ]; then
    echo "test-cuda-torch: setting up $VENV ($TORCH_REQ, ~4.7 GB)"
    [ -x "$PY" ] || "$PYTHON" -m venv "$VENV"
    "$PY" -m pip install -q "$TORCH_REQ"
    "$PY" -m pip install -q "packaging>=23.2" "pyproject-metadata>=0.9" "filelock>=3.12" \
        "ninja>=1.11" "pytest>=8" "pytest-timeout>=2.3" "nvidia-cuda-cuobjdump==13.*" numpy \
        "setuptools>=70" "wheel>=0.42"
    "$PY" -m pip install -q --no-build-isolation --no-deps -e .
    touch "$VENV/.installed"
fi

"$PY" - <<'PYEOF'
import sys
from pep517_torch.core import cuda, toolchain
import os
torch = toolchain.find_torch()
if not torch.has_cuda_runtime:
    sys.exit(f"test-cuda-torch: {torch.root} is torch {torch.version}, not a CUDA build")
toolkit = cuda.require_cuda(os.environ, torch_cuda=torch.cuda)
print(f"test-cuda-torch: torch {torch.version} (CUDA {torch.cuda}) at {torch.root}")
print(f"test-cuda-torch: nvcc {toolkit.version_str} found via {toolkit.found_via}")
PYEOF

status=0
"$PY" -m pytest -p no:cacheprovider tests/cuda_torch tests/test_cuda_build.py "$@" || status=$?
echo "test-cuda-torch: $([ $status -eq 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - started )) s"
exit $status
