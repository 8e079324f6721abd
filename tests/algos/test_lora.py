"""LoRA learners: the KL reference and RSPO's explorer live on the learner's base, never as copies."""

import pytest
import torch

import rspo_gym  # noqa: F401

pytest.importorskip("peft")

from transformers import AutoModelForCausalLM  # noqa: E402

from rspo_gym.algos import GRPOTrainer, RSPOTrainer  # noqa: E402
from rspo_gym.training.checkpoints import read_checkpoint  # noqa: E402
from rspo_gym.rollout.trajectory import to_batch  # noqa: E402

SMALL = dict(num_groups=2, group_size=2, max_turns=2, eval_every=0, progress=False, seed=0)


def _storage_bytes(*policies) -> int:
    """Bytes of distinct parameter storages across the policies' models (shared memory counted once)."""
    seen = {}
    for policy in policies:
        for p in policy.model.parameters():
            seen[p.untyped_storage().data_ptr()] = p.untyped_storage().nbytes()
    return sum(seen.values())


def test_reference_and_explorer_are_views_of_the_learners_base():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", lora_r=4, kl_coef=0.01, explorer_group_size=1, **SMALL)
    learner, explorer, reference = trainer.policy, trainer.explorer, trainer.reference
    assert explorer.model is learner.model and reference.model is learner.model
    assert (learner.adapter, explorer.adapter, reference.adapters_off) == ("default", "explorer", True)
    assert _storage_bytes(learner, explorer, reference) == _storage_bytes(learner)  # no copy anywhere
    full = RSPOTrainer("rspo/ALFWorld-v0", base="grpo", kl_coef=0.01, explorer_group_size=1, **SMALL)
    assert _storage_bytes(full.policy, full.explorer, full.reference) > 2.4 * _storage_bytes(full.policy)
    # each optimizer holds its own adapter and nothing else
    ids = lambda params: {id(p) for p in params}  # noqa: E731
    assert ids(trainer.optimizer.param_groups[0]["params"]) == ids(learner.policy_parameters())
    assert ids(trainer.explorer_optimizer.param_groups[0]["params"]) == ids(explorer.policy_parameters())
    assert not ids(learner.policy_parameters()) & ids(explorer.policy_parameters())


def test_lora_updates_train_adapters_only_and_the_reference_stays_the_base():
    trainer = RSPOTrainer("rspo/ALFWorld-v0", base="gigpo", lora_r=4, kl_coef=0.01, explorer_group_size=1, learning_rate=1e-2, **SMALL)
    named = dict(trainer.policy.model.named_parameters())
    base_before = {n: p.detach().clone() for n, p in named.items() if "lora_" not in n}
    rollout = trainer.collect(0)
    batch = to_batch(rollout.rows, trainer.policy.pad_token_id)
    reference_before = trainer.reference.logprobs(batch)["logprobs"]
    assert torch.allclose(trainer.policy.logprobs(batch)["logprobs"], reference_before, atol=1e-6)  # B = 0 at start
    metrics = trainer.train_on(rollout, 0)
    assert all(torch.equal(p, base_before[n]) for n, p in named.items() if "lora_" not in n)
    learner_after = trainer.policy.logprobs(batch)["logprobs"]
    assert not torch.allclose(learner_after, reference_before, atol=1e-4)  # the learner moved ...
    assert torch.allclose(trainer.reference.logprobs(batch)["logprobs"], reference_before, atol=1e-6)  # ... not the base
    assert "train/kl" in metrics and "explorer/grad_norm" in metrics


@pytest.mark.slow
def test_lora_runs_resume_exactly_and_export_adapters_and_merged_models(tmp_path):
    kwargs = dict(SMALL, iterations=2, checkpoint_every=1, lora_r=4, learning_rate=1e-2, explorer_group_size=1)
    full = RSPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "full"), **kwargs)
    full_history = full.learn()
    cut = RSPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "cut"), **kwargs)
    cut.learn(1)
    checkpoint = read_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert set(checkpoint["policy"]) == {"adapter"}  # adapters only, not the base
    resumed = RSPOTrainer("rspo/ALFWorld-v0", output_dir=str(tmp_path / "cut"), **kwargs)
    history = resumed.learn(2, resume=True)
    drop = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    assert drop(history) == drop(full_history)

    full.policy.save(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    full.policy.save(tmp_path / "merged", merged=True)
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    batch = to_batch(full.collect(5).rows[:4], full.policy.pad_token_id)
    ids, mask = batch.input_ids, batch.attention_mask
    with torch.no_grad(), full.policy.routing():
        expected = full.policy.model(input_ids=ids, attention_mask=mask).logits
    # merged weights sum W + BA once, where the adapter adds BA x to W x: float32 rounding, up to 1.3e-4 of logits
    # of ~5 after two steps at lr 1e-2 (measured on an Intel Xeon); a wrong merge is off by whole units
    assert torch.allclose(plain(input_ids=ids, attention_mask=mask).logits, expected, atol=1e-3, rtol=1e-4)


def test_full_fine_tuning_reference_is_bfloat16_under_mixed_precision_and_can_live_on_the_cpu():
    trainer = GRPOTrainer("rspo/ALFWorld-v0", precision="bf16-mixed", kl_coef=0.01, ref_offload=True, **SMALL)
    assert {p.dtype for p in trainer.reference.model.parameters()} == {torch.bfloat16}
    assert trainer.reference.device.type == "cpu" and trainer.reference.compute_device == trainer.policy.device
    assert "train/kl" in trainer.learn(1)[0]
    assert GRPOTrainer("rspo/ALFWorld-v0", **SMALL).reference is None  # no KL, no copy
