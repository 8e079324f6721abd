#!/usr/bin/env bash
# One GPU: benchmarks/train_scale.py plain vs under `accelerate launch --num_processes 1` with FSDP2
# (examples/accelerate/fsdp2_8gpu.yaml). Passes when the update's loss terms are equal to 1e-3 and
# FSDP2's iteration time is at most 10 % above the plain run's. Prints both tables and a verdict;
# JSON in $OUT (default results/benchmarks/fsdp_check). About 3-5 minutes on an H100/H200.
#
#   bash benchmarks/gpu_fsdp_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/benchmarks/fsdp_check}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Qwen2.5-0.5B shape (random weights, nothing downloaded), GiGPO alone (no RSPO explorer), 16 episodes
ARGS=(--shape qwen2.5-0.5b --backend hf --groups 4 --group-size 4 --explorer-group-size 0
      --max-turns 4 --max-new-tokens 64 --max-prompt-length 2048 --seed 0)
python -c "import torch; assert torch.cuda.is_available(), 'this check needs a GPU'"
echo "== plain"
python benchmarks/train_scale.py "${ARGS[@]}" --out "$OUT/plain.json"
echo "== FSDP2, accelerate launch --num_processes 1"
accelerate launch --config_file examples/accelerate/fsdp2_8gpu.yaml --num_processes 1 \
    benchmarks/train_scale.py "${ARGS[@]}" --out "$OUT/fsdp2.json"
python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
plain, fsdp = (json.loads((out / f"{name}.json").read_text()) for name in ("plain", "fsdp2"))
# a random model's rewards are all equal, so the policy-gradient term is 0 in both runs: the
# entropy term (and the KL to the reference) carry the comparison of the update's loss
ok = True
for key in ("train/pg_loss", "train/entropy", "train/kl"):
    a, b = plain["train"][key], fsdp["train"][key]
    ok &= abs(a - b) <= 1e-3
    print(f"{key:14s} plain {a:.6f} fsdp2 {b:.6f} (|diff| {abs(a - b):.2e}, limit 1e-3)")
seconds = (plain["iteration_seconds"], fsdp["iteration_seconds"])
overhead = seconds[1] / seconds[0] - 1
ok &= overhead <= 0.10
print(f"iteration plain {seconds[0]:.2f} s fsdp2 {seconds[1]:.2f} s (overhead {overhead:+.1%}, limit +10 %)")
for phase in plain["phases"]:
    print(f"  {phase:13s} plain {plain['phases'][phase]['seconds']:.2f} s  fsdp2 {fsdp['phases'][phase]['seconds']:.2f} s")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
