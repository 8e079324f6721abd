"""ART's ``LocalBackend`` trains on a CUDA GPU; on a CPU, ART itself fails late, inside
``model.register``, with ``No module named 'megatron'``. ``local_backend`` says why in one line
before that, whether or not ART is installed."""

from __future__ import annotations

import pytest

from rspo_gym.integrations import art as rspo_art


def test_missing_gpu_stack_is_named():
    assert rspo_art.local_training_missing(cuda=False, installed=lambda name: False) == [
        "a CUDA GPU", "megatron", "unsloth", "vllm"]
    assert rspo_art.local_training_missing(cuda=True, installed=lambda name: name != "megatron") == ["megatron"]
    assert rspo_art.local_training_missing(cuda=True, installed=lambda name: True) == []


def test_local_backend_on_a_cpu_says_it_needs_a_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ImportError) as caught:
        rspo_art.local_backend()
    message = str(caught.value)
    assert "\n" not in message and message.startswith("ART's LocalBackend trains on a CUDA GPU")
    assert "a CUDA GPU" in message.split("missing here:")[1] and "client=" in message
