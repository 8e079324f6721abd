"""A user script run under a launcher by ``test_distributed.py``: one GRPO run on ALFWorld.

``torchrun --standalone --nproc_per_node N tests/algos/distributed_run.py OUT ITERATIONS [KILL_AFTER]``
trains the random tiny model in fp32 on CPU (gloo) with the settings of ``SETTINGS``, writes each
rank's final weights to ``OUT/weights-rank<r>.pt`` and, with ``KILL_AFTER``, SIGKILLs rank 0 after
that iteration's checkpoint (the launcher then ends the other ranks). With ``RSPO=1`` in the
environment it trains RSPO-GRPO with a full-copy explorer instead (``RSPO_SETTINGS``).
"""

import os
import signal
import sys

SETTINGS = dict(
    num_groups=4, group_size=2, max_turns=3, mini_batch_size=64, micro_batch_size=3, eval_every=0,
    checkpoint_every=1, precision="fp32", learning_rate=1e-3, progress=False, seed=11, kl_coef=0.0,
)

RSPO_SETTINGS = dict(base="grpo", swap="explorer", explorer_group_size=1, explorer_sync_every=2)


def main(out: str, iterations: int, kill_after: int | None, rspo: bool = False) -> None:
    import torch

    import rspo_gym  # noqa: F401
    from rspo_gym.algos import GRPOTrainer, RSPOTrainer

    torch.set_num_threads(1)
    if rspo:
        trainer = RSPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", output_dir=out, **SETTINGS, **RSPO_SETTINGS)
    else:
        trainer = GRPOTrainer("rspo/ALFWorld-v0", "tiny-untrained", output_dir=out, **SETTINGS)

    def stop(trainer, metrics):
        if kill_after is not None and metrics["iteration"] == kill_after and trainer.dist.is_main:
            os.kill(os.getpid(), signal.SIGKILL)

    trainer.learn(iterations, callback=stop, resume=True)
    weights = {k: v.detach().clone() for k, v in trainer.policy.model.state_dict().items()}
    torch.save(weights, os.path.join(out, f"weights-rank{trainer.dist.rank}.pt"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None, os.environ.get("RSPO") == "1")
