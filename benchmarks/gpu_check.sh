#!/usr/bin/env bash
# The GPU check, in one go, on a machine with a CUDA device (about 8 minutes at most):
#   bash benchmarks/gpu_check.sh            (from the repository root)
# 1. CuPy: used if importable; else `pip install cupy-cuda12x` (the `gpu` extra), else wheels in .whl/
#    (a machine without network: see the device notes for carrying wheels). JAX likewise, optional.
# 2. python -m pytest -m gpu -q tests/batch/test_cuda.py   (the fused kernel against the numpy executor)
# 3. gradcli grad E2 --batch 1000000 --device cuda --json  (the CLI's default batch, end to end)
# 4. python benchmarks/gpu.py                              (the whole comparison at 1e7 and 1e8, then the
#                                                           kernel against JAX and a CuPy tape, E1-E4)
# Logs and the benchmark's JSON go to $OUT (or ./gpu_check_out). Exit status: pytest's, else the benchmark's.
# GPU_CHECK_NO_INSTALL=1 skips the install attempts; BENCH_ARGS passes options to benchmarks/gpu.py.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3 || command -v python)}
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false
start=$SECONDS

has() { "$PY" -c "import $1" >/dev/null 2>&1; }
try_install() {  # try_install MODULE PIP-SPEC...: registry first (fails fast offline), then local wheels
    local mod=$1; shift
    has "$mod" && return 0
    [ -n "${GPU_CHECK_NO_INSTALL:-}" ] && return 1
    timeout 120 "$PY" -m pip install -q --retries 0 --timeout 10 "$@" >>"$OUT/pip.log" 2>&1 && has "$mod" && return 0
    if compgen -G ".whl/*.whl" >/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >>"$OUT/pip.log" 2>&1 \
            && export PYTHONPATH="$PYTHONPATH:/tmp/site" && has "$mod" && return 0
    fi
    return 1
}

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | head -3
"$PY" --version
try_install cupy cupy-cuda12x || echo "CuPy could not be installed (see $OUT/pip.log): the GPU tests will skip"
try_install jax "jax[cuda12]" || echo "JAX not available: the benchmark runs without it"
"$PY" - <<'EOF'
import importlib.metadata as md
for m in ("numpy", "cupy-cuda12x", "cupy-cuda13x", "jax", "jaxlib", "click", "sympy", "rich", "pytest"):
    try:
        print(f"{m} {md.version(m)}")
    except md.PackageNotFoundError:
        print(f"{m}: not installed")
from gradcli.engines.device import cuda_status, resolve_device
print("cuda_status:", cuda_status(), "auto ->", resolve_device("auto"))
EOF
"$PY" -c "from gradcli.engines.device import cuda_status; raise SystemExit(0 if cuda_status()[0] else 3)"
gpu=$?

echo "== GPU tests ($((SECONDS - start)) s)"
set -o pipefail
timeout 150 "$PY" -m pytest -m gpu -q -p no:cacheprovider -rs tests/batch/test_cuda.py 2>&1 | tee "$OUT/pytest.log" | tail -40
tests=$?

echo "== the CLI's default batch, 1e6 points, end to end ($((SECONDS - start)) s)"
E2="exp(-(x**2 + y**2)/2) * cos(3*x*y)"
timeout 90 "$PY" -m gradcli grad "$E2" --batch 1000000 --domain x=-1:1 --domain y=-1:1 --device cuda --json \
    > "$OUT/cli_default.json" 2> "$OUT/cli_default.err"
cli=$?
echo "exit $cli (0 agree, 1 disagree; anything else is a failure)"; tail -3 "$OUT/cli_default.err"
"$PY" - "$OUT/cli_default.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as exc:
    raise SystemExit(f"no JSON: {exc}")
print("status", d["status"], "seconds", round(d["seconds"], 2), "points/s", round(d["points_per_second"]))
for name, m in d["methods"].items():
    print(f"  {name}: {m['status']}, {m['seconds']:.3f} s, agree {m['agree_fraction']}")
EOF
[ "$cli" -gt 1 ] && [ "$tests" -eq 0 ] && tests=$cli

echo "== benchmark ($((SECONDS - start)) s)"
left=$((470 - (SECONDS - start))); [ "$left" -lt 60 ] && left=60
bench=3
[ "$gpu" -eq 0 ] && { timeout "$left" "$PY" benchmarks/gpu.py --whole-budget 120 --repeat 5 --json "$OUT/gpu.json" \
    ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"; bench=$?; }
echo "== done in $((SECONDS - start)) s: tests exit $tests, benchmark exit $bench"
[ "$gpu" -ne 0 ] && { echo "no usable CUDA: nothing was checked"; exit "$gpu"; }
[ "$tests" -ne 0 ] && exit "$tests"
exit "$bench"
