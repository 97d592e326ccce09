#!/usr/bin/env bash
# make gpu-check: the course on a CUDA GPU, in one go, within about 8 minutes. Elsewhere it says "no CUDA device"
# and exits 0. Nothing in `make test` depends on it.
#
#   1. a venv of its own (.venv-gpu, KVLAB_GPU_VENV) with a CUDA build of torch (KVLAB_TORCH, default
#      torch==2.13.0, from KVLAB_TORCH_INDEX, default PyTorch's cu128 index); made with the system's site-packages
#      visible, so a machine whose Python already has a CUDA torch needs no download
#   2. the unit tests of every device-parametrised test on cuda alone (KVLAB_TEST_DEVICE=cuda, tests/conftest.py);
#      the stored notebook outputs were made on a CPU and are not compared
#   3. the benchmark (python -m tools.bench --quick): its CUDA section runs lib and transformers in bf16 and gives
#      each one's memory-bandwidth utilisation (MBU) against the bandwidth measured on the GPU
#   4. where vLLM is installed in that venv (and its model is in the Hugging Face cache, or the network reaches the
#      hub): notebook 10's client against a real `vllm serve` on 127.0.0.1 (python -m tools.openai_client; the
#      model KVLAB_VLLM_MODEL, default Qwen/Qwen2.5-0.5B-Instruct); elsewhere the summary says it was skipped
#   5. one summary
# Each step has a time limit (KVLAB_GPU_INSTALL_S 180, _TESTS_S 90, _BENCH_S 210, _VLLM_S 240); a step that fails is
# reported in the summary and the exit status is 1.
set -uo pipefail
cd "$(dirname "$0")/.."

T0=$SECONDS
VENV="${KVLAB_GPU_VENV:-.venv-gpu}"
TORCH="${KVLAB_TORCH:-torch==2.13.0}"
INDEX="${KVLAB_TORCH_INDEX:-https://download.pytorch.org/whl/cu128}"
OUT="${KVLAB_GPU_OUT:-bench-results/gpu}"
INSTALL_S="${KVLAB_GPU_INSTALL_S:-180}"
TESTS_S="${KVLAB_GPU_TESTS_S:-90}"
BENCH_S="${KVLAB_GPU_BENCH_S:-210}"
VLLM_S="${KVLAB_GPU_VLLM_S:-240}"
VLLM_MODEL="${KVLAB_VLLM_MODEL:-Qwen/Qwen2.5-0.5B-Instruct}"
PYTHON="${PYTHON:-python3}"
say() { echo "gpu-check: $*"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q "^GPU "; then
    say "no CUDA device (nvidia-smi finds no GPU here); nothing to check"
    exit 0
fi
GPU="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
say "GPU: $GPU"

# -- 1. the venv with a CUDA torch ---------------------------------------------------------------------------------
install_status=ok
cuda_torch() { "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; }
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv --system-site-packages "$VENV" || { say "cannot make $VENV"; exit 1; }
fi
if ! cuda_torch; then
    say "installing $TORCH from $INDEX into $VENV"
    timeout "$INSTALL_S" "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$TORCH" \
        --index-url "$INDEX" || install_status="torch install failed or timed out"
    [ "$install_status" = ok ] && ! cuda_torch && \
        install_status="the torch installed cannot use the GPU: $("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)"
fi
if cuda_torch; then
    timeout "$INSTALL_S" "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        -r requirements.txt "transformers==5.24.0" || install_status="requirements install failed or timed out"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . \
        || install_status="pip install -e . failed"
else
    say "no CUDA torch in $VENV ($install_status); set KVLAB_TORCH_INDEX to the index of this machine's CUDA version"
    exit 1
fi
GPY="$VENV/bin/python"
TORCH_INFO="$("$GPY" -c "import torch; print(torch.__version__, 'CUDA', torch.version.cuda, '|', torch.cuda.get_device_name(0))")"
say "torch $TORCH_INFO ($(( SECONDS - T0 )) s so far)"

# -- 2. the device-parametrised unit tests, on cuda alone ------------------------------------------------------------
mkdir -p "$OUT"
T1=$SECONDS
KVLAB_TEST_DEVICE=cuda timeout "$TESTS_S" "$GPY" -m pytest -q -p no:cacheprovider -n 4 -k device \
    tests/test_cache.py tests/test_demo.py tests/test_fastdecode.py tests/test_flash.py tests/test_generate.py \
    tests/test_model.py tests/test_paged.py tests/test_roofline.py 2>&1 | tee "$OUT/tests.txt"
tests_rc=${PIPESTATUS[0]}
TESTS_LINE="$(grep -E '(passed|failed|error)' "$OUT/tests.txt" | tail -1)"
TESTS_TIME=$(( SECONDS - T1 ))

# -- 3. the benchmark, its CUDA section in bf16 with MBU ------------------------------------------------------------
T2=$SECONDS
CI=true timeout "$BENCH_S" "$GPY" -m tools.bench --quick --accelerator cuda --out "$OUT" 2>&1 | tee "$OUT/bench.txt"
bench_rc=${PIPESTATUS[0]}
BENCH_TIME=$(( SECONDS - T2 ))

# -- 4. notebook 10's client against a real vllm serve, where vLLM is installed ---------------------------------------
vllm_rc=0
if "$GPY" -c "import vllm" 2>/dev/null; then
    T3=$SECONDS
    PORT="$("$GPY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")"
    "$VENV/bin/vllm" serve "$VLLM_MODEL" --host 127.0.0.1 --port "$PORT" > "$OUT/vllm-serve.log" 2>&1 &
    VLLM_PID=$!
    timeout "$VLLM_S" "$GPY" -m tools.openai_client --url "http://127.0.0.1:$PORT/v1" --model "$VLLM_MODEL" \
        --wait $(( VLLM_S - 30 )) 2>&1 | tee "$OUT/vllm-client.txt"
    vllm_rc=${PIPESTATUS[0]}
    kill "$VLLM_PID" 2>/dev/null; wait "$VLLM_PID" 2>/dev/null
    VLLM_LINE="$(tail -1 "$OUT/vllm-client.txt") (exit $vllm_rc, $(( SECONDS - T3 )) s; server log $OUT/vllm-serve.log)"
else
    VLLM_LINE="skipped: vLLM is not installed in $VENV (pip install vllm there to run notebook 10's client on it)"
fi

# -- 5. one summary --------------------------------------------------------------------------------------------------
echo
echo "================================ gpu-check summary ================================"
echo "GPU:    $GPU"
echo "torch:  $TORCH_INFO (venv $VENV; install: $install_status)"
echo "tests:  ${TESTS_LINE:-no result} (exit $tests_rc, ${TESTS_TIME} s; device tests on cuda only, KVLAB_TEST_DEVICE=cuda)"
echo "bench:  exit $bench_rc, ${BENCH_TIME} s ($OUT/bench.json, $OUT/bench.txt)"
echo "vllm:   $VLLM_LINE"
"$GPY" - "$OUT/bench.json" <<'PY'
import json, sys
from pathlib import Path

path = Path(sys.argv[1])
if not path.exists():
    print("        no bench.json (the benchmark did not finish)")
    sys.exit(0)
a = json.loads(path.read_text()).get("accelerator", {})
if "skipped" in a:
    print(f"        CUDA section skipped: {a['skipped']}")
    sys.exit(0)
print(f"        {a['device']}, {a['dtype']}, {a['new_tokens']} new tokens; read bandwidth {a['bandwidth_gbs']} GB/s")
for r in a["rows"]:
    tps = "-" if r["tokens_per_s"] is None else f"{r['tokens_per_s']:.1f} tok/s"
    mbu = "-" if r["mbu"] is None else f"MBU {r['mbu']:.0%}"
    note = f"  ({r['error'][:60]})" if r.get("error") else ""
    print(f"        {r['name']:<34} {tps:>14}  {mbu:>8}  same tokens: {r['same_tokens_as_lib']}{note}")
PY
echo "total:  $(( SECONDS - T0 )) s"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$vllm_rc" -eq 0 ] && [ "$install_status" = ok ]
