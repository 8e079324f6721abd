#!/usr/bin/env bash
# GRPO on WebShop (rspo/WebShop-v1).
#
#   bash examples/recipes/grpo_webshop.sh cpu      # the tiny model on a CPU
#   bash examples/recipes/grpo_webshop.sh gpu      # Qwen2.5-1.5B-Instruct on one GPU (the [vllm] extra)
#   bash examples/recipes/grpo_webshop.sh launch   # the one-GPU run, data-parallel on NUM_GPUS GPUs (8)
#
# Further arguments go to `rspo-gym train` and win over the recipe's (`cpu --iterations 2
# --output-dir runs/try`); DRY_RUN=1 prints the command instead of running it.
set -euo pipefail
mode=${1:-cpu}
shift $(( $# > 0 ))

run=(--algo grpo --env rspo/WebShop-v1)
# CPU: the tiny model's WebShop clone at the scale of docs/results.md's learning comparison (4 tasks
# x 4 trajectories, the env's 15 turns, lr 1e-3, 2 epochs of 16-row mini-batches, held-out
# evaluation at T = 0.4).
cpu=(--model tiny --iterations 6 --num-groups 4 --group-size 4 --eval-tasks 30
     --set learning_rate=1e-3 --set ppo_epochs=2 --set mini_batch_size=16 --set eval_temperature=0.4 --set eval_every=2)
# One GPU, as docs/training_at_scale.md: Qwen2.5-1.5B-Instruct, every weight trained, on
# verl-agent's settings (--preset verl-agent, docs/verl_agent.md: 16 tasks x 8 trajectories, 15
# turns, prompts up to 4,096 tokens, <think> replies up to 512, lr 1e-6, KL 0.01, 64-row
# mini-batches, gradient checkpointing), 150 iterations (the GiGPO paper's), vLLM generation,
# 16,384-token micro-batches.
gpu=(--model Qwen/Qwen2.5-1.5B-Instruct --preset verl-agent --iterations 150
     --set generation_backend=vllm --set max_tokens_per_micro_batch=16384)

case $mode in
  cpu) cmd=(rspo-gym train "${run[@]}" "${cpu[@]}") ;;
  gpu) cmd=(rspo-gym train "${run[@]}" "${gpu[@]}") ;;
  # DDP through accelerate (docs/scaling.md): every rank holds the one-GPU run's model and plays its
  # share of the tasks; examples/accelerate/ has FSDP2 and ZeRO configs for models that do not fit
  launch) cmd=(accelerate launch --num_processes "${NUM_GPUS:-8}" -m rspo_gym train "${run[@]}" "${gpu[@]}") ;;
  *) echo "usage: $0 [cpu|gpu|launch] [rspo-gym train options]" >&2; exit 2 ;;
esac
if [[ -n ${DRY_RUN:-} ]]; then
  printf '%q ' "${cmd[@]}" "$@"; echo
else
  exec "${cmd[@]}" "$@"
fi
