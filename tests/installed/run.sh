#!/usr/bin/env bash
# The installed tier (`make test-installed`): the docs' runnable blocks, as printed, with
# pep517_torch installed the way the README says, never from this checkout.
#
#  1. builds pep517_torch's own wheel from this repository (`pip wheel --no-deps -w DIR .`);
#  2. makes two fresh venvs outside the checkout, one with torch 2.13.0 (this repository's .venv's
#     copy) and one with torch 2.14.1, the CUDA 13.0 build (.venv-cuda's, which the CUDA-torch
#     tier makes, made here if absent; or CUDA_TORCH_SITE=<site-packages holding it>); each sees its torch and the
#     packages torch needs through a .pth file naming a folder of links (tests/installed/layer.py:
#     seconds, no 5.5 GB install), and gets pep517_torch's wheel with `pip install` (not
#     editable), its dependencies resolved by pip from pip's usual sources, and uv (the docs'
#     uv blocks run the uv a user installs; this checkout's .venv is never on PATH);
#  3. runs tests/installed/test_docs.py: each doc's blocks in a working folder of its own under
#     a temporary folder (conventions: tests/installed/doc_blocks.py).
# Where torch 2.14.1 is absent it says so in one line and exits 0, as the CUDA-torch tier does.
#
#   PYTHON=python3.11 tests/installed/run.sh [pytest args...]
#   KEEP=1 ...: keep the temporary folder (its path is printed)
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
TESTS_PY=${TESTS_PY:-.venv/bin/python}  # runs pytest (the harness); never a block's python
CUDA_VENV=${CUDA_VENV:-.venv-cuda}
started=$(date +%s)
skip() { echo "test-installed: SKIP: $*"; exit 0; }

[ -x "$TESTS_PY" ] || skip "no $TESTS_PY (make venv) to run the tier with"
torch_site() {  # the site-packages folder holding the torch of interpreter $1, or nothing
    "$1" -c 'import importlib.metadata as m; print(m.distribution("torch").locate_file(""))' 2>/dev/null || true
}
cpu_site=$(torch_site "$TESTS_PY")
[ -n "$cpu_site" ] || skip "$TESTS_PY has no torch (make venv)"
if [ -n "${CUDA_TORCH_SITE:-}" ]; then
    cuda_site=$CUDA_TORCH_SITE
else
    # the CUDA-torch tier's venv, made now if it is not yet (from pip's local sources only,
    # as that tier makes it; it says so in one line where torch 2.14.1 is not on this disk)
    made=""
    if [ ! -f "$CUDA_VENV/.torch" ]; then  # what it said is shown after (a skip: in our line)
        made=$(CUDA_VENV=$CUDA_VENV VENV_ONLY=1 PYTHON=$PYTHON tests/cuda_torch/run.sh 2>&1 || true)
        [ -f "$CUDA_VENV/.torch" ] && echo "$made"
        made=$(echo "$made" | tail -1)
    fi
    cuda_site=$([ -f "$CUDA_VENV/.torch" ] && torch_site "$CUDA_VENV/bin/python" || true)
fi
[ -n "$cuda_site" ] && [ -f "$cuda_site/torch/version.py" ] \
    || skip "no torch 2.14.1: no $CUDA_VENV${made:+ (${made#test-cuda-torch: })}, no CUDA_TORCH_SITE=<site-packages holding it>"

base=$(mktemp -d "${TMPDIR:-/tmp}/pep517_torch-installed.XXXXXX")
if [ -z "${KEEP:-}" ]; then trap 'rm -rf "$base"' EXIT; else echo "test-installed: keeping $base"; fi

step() { echo "test-installed: $* ($(( $(date +%s) - started )) s)"; }
step "building pep517_torch's wheel"
"$PYTHON" -m pip wheel -q --no-deps -w "$base/dist" . >"$base/wheel.log" 2>&1 \
    || { cat "$base/wheel.log"; exit 1; }
wheel=$(ls "$base"/dist/pep517_torch-*.whl)

envs="{"
for pair in "2.13.0=$cpu_site" "2.14.1=$cuda_site"; do
    want=${pair%%=*} site=${pair#*=} env="$base/envs/torch-${pair%%=*}"
    "$PYTHON" -m venv "$env"
    got=$("$TESTS_PY" tests/installed/layer.py "$site" "$base/envs/layer-$want")
    [ "${got%%+*}" = "$want" ] || skip "the torch at $site is $got, not $want"
    purelib=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$base/envs/layer-$want" >"$purelib/torch_layer.pth"
    # the venv's bundled setuptools (Python 3.11's) would hide the one torch requires (>= 77)
    "$env/bin/python" -m pip uninstall -q -y setuptools
    step "torch $got in $env; pip install $(basename "$wheel")"
    "$env/bin/python" -m pip install -q "$wheel" "uv>=0.13,<0.14" >"$base/install-$want.log" 2>&1 \
        || { cat "$base/install-$want.log"; exit 1; }
    # installed, not this checkout: run from elsewhere, it must be the venv's own copy
    (cd "$base" && "$env/bin/python" -W ignore -c 'import sys, pep517_torch, torch
where = pep517_torch.__file__
assert where.startswith(sys.prefix), where
print(f"test-installed: pep517_torch {pep517_torch.__version__} from {where}, torch {torch.__version__}")')
    envs="$envs\"$want\": \"$env\", "
done
export PEP517_TORCH_INSTALLED_ENVS="${envs%, }}"
export PEP517_TORCH_INSTALLED_REPORT="$base/timings.txt"
export PEP517_TORCH_INSTALLED_WHEEL="$wheel"

status=0
"$TESTS_PY" -m pytest -p no:cacheprovider tests/installed "$@" || status=$?
[ -f "$PEP517_TORCH_INSTALLED_REPORT" ] && sed 's/^/test-installed: /' "$PEP517_TORCH_INSTALLED_REPORT"
echo "test-installed: $([ $status -eq 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - started )) s"
exit $status
