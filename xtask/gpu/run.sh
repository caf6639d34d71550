#!/usr/bin/env bash
# The GPU check (issue 17, item 6), run on a lent GPU machine from the bundle that
# `cargo xtask gpu-bundle` builds here (see xtask/src/gpu.rs):
#   device tool: run(command="bash gpu-check/run.sh", carry=["gpu-check"], timeout_s=540)
# It finds the machine's libtorch (PyTorch 2.11 in python3), then runs, each step under a time cap:
#   1. the trainer's tests on CUDA (EASEML_DEVICE=cuda: every model learns there; seq2seq included),
#      (their float16_with_loss_scaling_learns trains networks in float16 with loss scaling on the GPU),
#      the learning tests again in float32 (EASEML_MIXED_PRECISION=off) to set every model's quality
#      beside the default's, then the seq2seq test's run printed under six seeds (a diagnosis);
#   2. `easeml bench trainer` on the GPU against PyTorch on the same GPU and torch install, tuned as
#      a performance-minded user runs it (issue 47: cuDNN autotuner, fused Adam): batch 32 at 32x32
#      against the eager peer, ResNet-18 at 224x224 batch 128 against the eager and bf16 +
#      channels-last peers (with mixed precision on both sides too, and whole training runs at 224,
#      data loading included, with and without it), and 32x32 against torch.compile
#      (reduce-overhead; compile time apart);
#   3. `easeml bench mop --real` with one worker, then 3 workers sharing the GPU (task-parallel, MOP).
# Everything goes to $OUT (check.log, the benchmarks' summary.json files and plot), flat: the device
# tool brings back at most 8 files. Steps that fail are reported and the next one runs.
# GPU_CHECK_DEVICE=cpu runs the same steps on the CPU (a dry run of the bundle on any machine whose
# python3 has torch 2.11).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
log=$out/check.log
exec > >(tee "$log") 2>&1
cat "$here/BUILD.txt"
torch_lib=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || {
    echo "no python3 with torch here: this check needs the machine's PyTorch"; exit 2; }
export LD_LIBRARY_PATH="$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -c 'import torch; print("python3 torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
cores=$(nproc)
echo "cores $cores, libtorch from $torch_lib"
status=0
step() { # step NAME SECONDS COMMAND...
    local name=$1 cap=$2; shift 2
    echo "==> $name (cap ${cap}s): $*"
    local started=$SECONDS
    timeout --kill-after=10 "$cap" "$@"
    local rc=$?
    echo "==> $name: exit $rc after $((SECONDS - started))s"
    [ "$rc" -eq 0 ] || status=1
}
device=${GPU_CHECK_DEVICE:-cuda}
case "$device" in
    cpu) worker_devices=cpu,cpu,cpu ;;
    *) worker_devices=cuda:0,cuda:0,cuda:0 ;;
esac
export EASEML_DEVICE=$device
for test in "$here"/bin/trainer-*; do
    name=$(basename "$test")
    case "$name" in
        trainer-learn) cap=240; extra=--nocapture ;; # every model's quality on this device, in the log
        *) cap=120; extra= ;;
    esac
    step "$name" "$cap" "$test" --test-threads 4 $extra
done
# Every model's quality in float32 beside the default's (bfloat16 autocast on GPUs that have it,
# issue 47 item 2: no model's quality may fall under mixed precision).
step trainer-learn-float32 240 env EASEML_MIXED_PRECISION=off "$here/bin/trainer-learn" --test-threads 4 --nocapture
# The seq2seq test's run under six seeds on this device (printed, not checked).
step seq2seq-diagnosis 120 "$here/bin/trainer-learn" seq2seq_diagnosis --ignored --nocapture
work=$(mktemp -d)
step bench-trainer 150 "$here/bin/easeml" bench trainer --device "$device" --python python3 --rounds 3 \
    --memory-examples 5000 --out "$work/trainer"
cp "$work/trainer/summary.json" "$out/trainer_summary.json" 2>/dev/null
cp "$work/trainer/throughput.svg" "$out/trainer_throughput.svg" 2>/dev/null
step bench-trainer-224 150 "$here/bin/easeml" bench trainer --device "$device" --python python3 \
    --rounds 2 --size 224 --batch 128 --models resnet18 --peer eager,amp --no-memory \
    --mixed-precision --run-examples 2560 --run-epochs 2 --out "$work/trainer224"
cp "$work/trainer224/summary.json" "$out/trainer_224_summary.json" 2>/dev/null
step bench-trainer-compile 150 "$here/bin/easeml" bench trainer --device "$device" --python python3 \
    --rounds 1 --size 32 --batch 32 --peer compile --no-memory --out "$work/trainer_compile"
cp "$work/trainer_compile/summary.json" "$out/trainer_compile_summary.json" 2>/dev/null
step bench-mop-real 150 "$here/bin/easeml" bench mop --real --models 6 --workers 3 --epochs 3 \
    --examples 20000 --devices "$worker_devices" --out "$work/mop"
cp "$work/mop/summary.json" "$out/mop_real_summary.json" 2>/dev/null
nvidia-smi --query-gpu=memory.used --format=csv,noheader || true
echo "==> gpu check: $([ $status -eq 0 ] && echo every step passed || echo some step failed)"
exit $status
