"""rspo_gym: environments and RL algorithms for multi-turn LLM agents (RSPO, GRPO, PPO, GiGPO)."""

from pathlib import Path

from setuptools import find_packages, setup

EXTRAS = {
    # playwright drives the system's Chromium in the web UI's browser test (no browser download).
    "test": ["pytest>=7", "playwright>=1.40"],
    # The web UI for people (``rspo-gym webshop serve``).
    "web": ["flask>=3"],
    # The original engine, for cross-checks and as an optional backend. Fast-Downward compiles
    # from source (about 2 minutes, needs g++ and cmake).
    "textworld": ["textworld[pddl]==1.7.0", "alfworld==0.4.2"],
}
EXTRAS["all"] = sorted({req for name, reqs in EXTRAS.items() if name != "textworld" for req in reqs})

setup(
    name="rspo-gym",
    version="0.1.0",
    description=__doc__,
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.10",
    packages=find_packages(include=["rspo_gym", "rspo_gym.*"]),
    install_requires=[
        "gymnasium>=1.0",
        "numpy>=1.24",
        "rapidfuzz>=3",
        "bm25s>=0.2",
        "PyStemmer>=2.2",
    ],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["rspo-gym=rspo_gym.cli:main"]},
)
