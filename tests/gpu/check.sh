#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, nvcc and a CUDA build of torch, build the CUDA
# fixtures with that machine's torch and nvcc, run their kernels on random inputs against torch
# references (relative error, no NaN), time the build, and print a PASS/FAIL summary.
#
#   tests/gpu/check.sh                 uses python3 (or $PYTHON), which must have torch with CUDA
#   PYTHON=/path/to/python tests/gpu/check.sh
#
# It makes a venv in a temporary directory that sees $PYTHON's site-packages (torch is not
# reinstalled), installs pep517_torch from this checkout into it (pip, no build isolation; its
# few dependencies from the index only when missing), then:
#   1. builds fixtures/cuda as a wheel with pip (default arch list: the visible GPUs), timed;
#   2. runs its kernels from the unpacked wheel (every GPU, 9 sizes, a side stream);
#   3. builds the same sources with pep517_torch.load() and runs them again;
#   4. builds fixtures/cuda_torch as a wheel (an op library on torch's CUDA APIs: AT_DISPATCH,
#      current stream, CUDAGuard, a TORCH_LIBRARY op, a dlink = true extension) and with load(),
#      and runs every kernel on every GPU against torch's own ops.
# It ends with one table: each step, then each kernel (cases, worst relative error against
# torch, result). Exit status 0 only when every step passed. Work files stay in the printed
# directory. Under 8 minutes on one H200 (16 cores): the arch default is the visible GPUs.
# GPU_CHECK_ALLOW_NO_GPU=1 runs the build steps on a machine without a GPU (kernels are skipped).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pep517_torch_gpu_check.XXXXXX")
ALLOW_NO_GPU=${GPU_CHECK_ALLOW_NO_GPU:-0}
declare -a SUMMARY=()
FAILED=0

say() { printf 'gpu-check: %s\n' "$*"; }
record() {  # record STATUS STEP [DETAIL]
    SUMMARY+=("$(printf '%-4s  %s%s' "$1" "$2" "${3:+ ($3)}")")
    [ "$1" = PASS ] || [ "$1" = SKIP ] || FAILED=1
}
CHECK_STARTED=$(date +%s)
finish() {
    echo
    echo "==================== pep517_torch GPU check ===================="
    for line in "${SUMMARY[@]}"; do echo "$line"; done
    for table in "$WORK"/*.table; do
        [ -f "$table" ] || continue
        echo "--- $(basename "$table" .table)"
        cat "$table"
    done
    echo "total: $(( $(date +%s) - CHECK_STARTED )) s"
    echo "work files: $WORK"
    if [ "$FAILED" -eq 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
    exit "$FAILED"
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

say "checkout $ROOT, work dir $WORK"

# ---- 0. the machine: python with a CUDA torch, a GPU, nvcc --------------------------------
"$PYTHON" - >"$WORK/machine.txt" 2>&1 <<'PYEOF'
import sys, torch
print(f"python {sys.version.split()[0]} at {sys.executable}")
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) at {torch.__file__}")
if torch.version.cuda is None:
    sys.exit("torch is a CPU build: install a CUDA build of torch")
print(f"GPUs visible to torch: {torch.cuda.device_count()}")
for i in range(torch.cuda.device_count()):
    cap = ".".join(map(str, torch.cuda.get_device_capability(i)))
    print(f"  GPU {i}: {torch.cuda.get_device_name(i)} (compute capability {cap})")
sys.exit(0 if torch.cuda.is_available() else 3)
PYEOF
status=$?
cat "$WORK/machine.txt"
NO_GPU=0
if [ "$status" -eq 3 ] && [ "$ALLOW_NO_GPU" = 1 ]; then
    say "no GPU visible: building only (GPU_CHECK_ALLOW_NO_GPU=1)"
    record SKIP "GPU" "none visible; kernels are not run"
    NO_GPU=1
elif [ "$status" -eq 3 ]; then
    record FAIL "machine" "torch sees no GPU (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset})"
    finish
elif [ "$status" -ne 0 ]; then
    record FAIL "machine" "$(tail -n 1 "$WORK/machine.txt")"
    finish
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv

# ---- 1. a venv seeing the ambient torch, with pep517_torch from this checkout --------------
# --system-site-packages would not see the packages of a venv or conda env $PYTHON runs in, so
# the new venv gets a .pth file listing $PYTHON's own site-packages directories instead.
VENV="$WORK/venv"
if "$PYTHON" -m venv "$VENV" >"$WORK/venv.log" 2>&1; then
    PY="$VENV/bin/python"
    venv_site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$PYTHON" -c 'import site, sys; print("\n".join([*site.getsitepackages(), site.getusersitepackages()]))' \
        >"$venv_site/_gpu_check_ambient.pth"
else
    cat "$WORK/venv.log"
    record FAIL "venv" "python -m venv failed; see $WORK/venv.log"
    finish
fi
if ! "$PY" -c "import packaging, pyproject_metadata" 2>/dev/null \
    || ! { "$PY" -c "import ninja" 2>/dev/null || command -v ninja >/dev/null; }; then
    say "installing pep517_torch's dependencies into the venv"
    "$PY" -m pip install -q "packaging>=23.2" "pyproject-metadata>=0.9" \
        "ninja>=1.11" >>"$WORK/venv.log" 2>&1
fi
if "$PY" -m pip install -q --no-build-isolation --no-deps "$ROOT" >>"$WORK/venv.log" 2>&1 \
    && (cd "$WORK" && "$PY" -c "import pep517_torch" 2>>"$WORK/venv.log"); then
    record PASS "install pep517_torch" "$("$PY" -c 'import pep517_torch; print(pep517_torch.__version__)')"
else
    tail -n 20 "$WORK/venv.log"
    record FAIL "install pep517_torch" "see $WORK/venv.log"
    finish
fi
(cd "$WORK" && "$PY" -m pep517_torch doctor "$ROOT/fixtures/cuda") >"$WORK/doctor.txt" 2>&1
cat "$WORK/doctor.txt"

# ---- 2. the wheel, timed ------------------------------------------------------------------
cp -r "$ROOT/fixtures/cuda" "$WORK/cuda"
rm -rf "$WORK/cuda/build" "$WORK/cuda/dist"
say "building fixtures/cuda as a wheel (pip wheel --no-build-isolation)"
started=$(now)
if (cd "$WORK" && "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$WORK/dist" \
        "$WORK/cuda") >"$WORK/wheel.log" 2>&1; then
    build_s=$(elapsed "$started")
    grep -E 'pep517_torch:|\] (compiling|linking).*: done' "$WORK/wheel.log" | sed 's/^ *//'
    record PASS "wheel build" "${build_s} s wall, pip included"
else
    grep -E 'pep517_torch|error' "$WORK/wheel.log" | tail -n 30
    record FAIL "wheel build" "see $WORK/wheel.log"
    finish
fi
WHEEL=$(ls "$WORK"/dist/cudaops-*.whl)
"$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
    "$WHEEL" "$WORK/site"
SO=$(ls "$WORK"/site/cudaops/_C*.so)
CUOBJDUMP=$(command -v cuobjdump || "$PY" -c 'import glob, os, sys
hits = [h for p in sys.path for h in sorted(glob.glob(os.path.join(p, "nvidia", "*", "bin", "cuobjdump")))]
print(hits[0] if hits else "")')
if [ -n "$CUOBJDUMP" ]; then
    say "code in $(basename "$SO"):"
    "$CUOBJDUMP" --list-elf --list-ptx "$SO" | sed 's/^/    /'
fi
started=$(now)
(cd "$WORK" && "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$WORK/dist" "$WORK/cuda") \
    >"$WORK/rebuild.log" 2>&1
say "no-op rebuild: $(elapsed "$started") s ($(grep -c '\] compiling.*: done' "$WORK/rebuild.log") compiled)"

run_kernels() {  # run_kernels STEP SITE ARGS...: check_kernels.py with the venv's python
    local step=$1 site=$2
    shift 2
    if [ "$NO_GPU" = 1 ]; then
        record SKIP "$step" "no GPU"
        return
    fi
    if (cd "$WORK" && PYTHONPATH="$site" "$PY" "$ROOT/tests/gpu/check_kernels.py" "$@") \
        >"$WORK/$step.log" 2>&1; then
        grep -E '^(info|FAIL)' "$WORK/$step.log"
        grep -E '^\|' "$WORK/$step.log" >"$WORK/$step.table"
        record PASS "$step" "$(grep -c '^ok' "$WORK/$step.log") cases"
    else
        grep -E '^\|' "$WORK/$step.log" >"$WORK/$step.table"
        grep -Ev '^(ok|\|)' "$WORK/$step.log" | tail -n 40
        record FAIL "$step" "$(grep -c '^FAIL' "$WORK/$step.log") cases failed; see $WORK/$step.log"
    fi
}

# ---- 3. kernels from the wheels, then from load() ----------------------------------------
run_kernels "wheel kernels" "$WORK/site" wheel

# fixtures/cuda_torch: torch's CUDA APIs, a TORCH_LIBRARY op, a device-linked extension.
cp -r "$ROOT/fixtures/cuda_torch" "$WORK/cuda_torch"
rm -rf "$WORK/cuda_torch/build" "$WORK/cuda_torch/dist" "$WORK/cuda_torch/setup.py"
say "building fixtures/cuda_torch as a wheel"
started=$(now)
if (cd "$WORK" && "$PY" -m pip wheel -v --no-build-isolation --no-deps -w "$WORK/dist-torch" \
        "$WORK/cuda_torch") >"$WORK/torch-wheel.log" 2>&1; then
    record PASS "cuda_torch wheel build" "$(elapsed "$started") s wall"
    "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" \
        "$(ls "$WORK"/dist-torch/cudatorchops-*.whl)" "$WORK/site-torch"
    for so in "$WORK"/site-torch/cudatorchops/*.so; do
        [ -n "$CUOBJDUMP" ] && say "code in $(basename "$so"): $("$CUOBJDUMP" --list-elf "$so" | sed 's/.*\.\(sm_[0-9a-z]*\)\.cubin/\1/' | tr '\n' ' ')"
    done
    run_kernels "cuda_torch wheel kernels" "$WORK/site-torch" torch-wheel
else
    grep -E 'pep517_torch|error' "$WORK/torch-wheel.log" | tail -n 30
    record FAIL "cuda_torch wheel build" "see $WORK/torch-wheel.log"
fi
export TORCH_EXTENSIONS_DIR="$WORK/torch_extensions"
if [ "$NO_GPU" = 1 ]; then
    # Still prove load() builds and imports both fixtures without a GPU.
    if (cd "$WORK" && "$PY" - "$ROOT" >"$WORK/jit-build.log" 2>&1 <<'PYEOF'
import sys, pep517_torch
from pathlib import Path
root = Path(sys.argv[1])
csrc = root / "fixtures/cuda/csrc"
m = pep517_torch.load("gpu_check_cudaops", [str(p) for p in sorted(csrc.glob("*.c*"))],
                      extra_include_paths=[str(csrc / "include")],
                      extra_cflags=["-DCUDAOPS_CXX_ONLY=1"], extra_cuda_cflags=["-DCUDAOPS_NVCC_ONLY=1"])
print("cudaops via load():", m.cudart_version())
csrc = root / "fixtures/cuda_torch/csrc"
m = pep517_torch.load("gpu_check_cudatorchops", [str(p) for p in sorted(csrc.glob("*.c*"))])
print("cudatorchops via load():", m.cuda_available(), m.device_count())
PYEOF
    ); then
        cat "$WORK/jit-build.log" | grep -v '^\[' ; record PASS "load() builds" "no GPU: not run"
    else
        tail -n 30 "$WORK/jit-build.log"; record FAIL "load() builds" "see $WORK/jit-build.log"
    fi
else
    run_kernels "load() kernels" "$WORK" jit "$ROOT"
    run_kernels "torch CUDA APIs via load()" "$WORK" torch-apis "$ROOT"
fi
finish
