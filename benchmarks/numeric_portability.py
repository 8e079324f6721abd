"""Which code-path switch changes the quick start's bits on this CPU? A fingerprint per variable.

The quick start promises the same numbers on every x86-64 CPU. Between two CPUs only the code
paths the libraries pick can differ: ATen's vector kernels (``ATEN_CPU_CAPABILITY``), MKL's branch
(``MKL_ENABLE_INSTRUCTIONS``, ``MKL_CBWR``: a vendor or cache size picks another by default),
oneDNN's ISA (``ONEDNN_MAX_CPU_ISA`` / ``DNNL_MAX_CPU_ISA``, or oneDNN off) and the threads a
float sum is split over. One machine can force each of those paths, so it can show which ones the
numbers depend on. Each variant runs in a fresh process (the libraries read their variables once)
and prints a sha256 of the trained weights:

- ``probe`` (seconds): ``tiny-alfworld`` on a fixed batch of token ids, three AdamW steps of the
  language-model loss, then a sampling forward pass: the kernels of the quick start's training and
  generation, without its environment;
- ``quickstart``: ``rspo-gym quickstart --iterations 2 --eval-tasks 2 --eval-episodes 1
  --eval-every 0``, hashing the ``policy/`` it writes;
- ``drrn``: ``rspo-gym train --model drrn`` (GRPO on ``rspo/WebShop-v0``, 4 groups of 4), hashing
  the scorer's trained weights. Pinned, the command runs ATen's AVX2 kernels and MKL's
  ``COMPATIBLE`` branch (``cpu_settings.pin_scorer_kernels``); ``--native`` turns that off.

``--pinned`` (the default) runs them as the quick start does, its pins over whatever the variant
put in the environment: every fingerprint must then be the same, but that of "1 thread, forced",
which overrides the quick start's own thread count (2) and so sums floats in other chunks. ``--native`` drops the pins, so
each variable acts: the variables whose fingerprint differs from the plain run's are the ones
a CPU's own choice would change the numbers through.

    python benchmarks/numeric_portability.py --workload probe --native
    python benchmarks/numeric_portability.py --workload quickstart --pinned
    python benchmarks/numeric_portability.py --workload drrn --iterations 3

Prints a markdown table (variant, sha256, equal to the first row, seconds) and the CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name -> (environment variables, Python run before the workload in the fresh process)
VARIANTS: dict[str, tuple[dict[str, str], str]] = {
    "plain": ({}, ""),
    "ATEN_CPU_CAPABILITY=avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, ""),
    "ATEN_CPU_CAPABILITY=avx512": ({"ATEN_CPU_CAPABILITY": "avx512"}, ""),
    "ATEN_CPU_CAPABILITY=default": ({"ATEN_CPU_CAPABILITY": "default"}, ""),
    "MKL_ENABLE_INSTRUCTIONS=AVX2": ({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, ""),
    "MKL_ENABLE_INSTRUCTIONS=AVX512": ({"MKL_ENABLE_INSTRUCTIONS": "AVX512"}, ""),
    "MKL_CBWR=AVX2": ({"MKL_CBWR": "AVX2"}, ""),
    "MKL_CBWR=COMPATIBLE": ({"MKL_CBWR": "COMPATIBLE"}, ""),
    "MKL_CBWR=AVX512": ({"MKL_CBWR": "AVX512"}, ""),
    "ONEDNN_MAX_CPU_ISA=AVX2": ({"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}, ""),
    "ONEDNN_MAX_CPU_ISA=ALL": ({"ONEDNN_MAX_CPU_ISA": "ALL", "DNNL_MAX_CPU_ISA": "ALL"}, ""),
    "mkldnn off": ({}, "import torch; torch.backends.mkldnn.enabled = False\n"),
    "OMP_NUM_THREADS=1": ({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}, ""),
    "1 thread, forced": ({}, "import torch; _set = torch.set_num_threads; torch.set_num_threads = lambda n: _set(1); _set(1)\n"),
    "OMP_WAIT_POLICY=ACTIVE": ({"OMP_WAIT_POLICY": "ACTIVE"}, ""),
}

#: The variables a variant may set: cleared from the inherited environment first, so that each
#: variant differs from ``plain`` by its own variables only.
SWITCHES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")

PROBE = """
import hashlib, torch
{pin}
torch.set_num_threads(2)
from rspo_gym.policies.models import load_model
model, _ = load_model("tiny-alfworld", seed=0)
model.train()
generator = torch.Generator().manual_seed(0)
ids = torch.randint(0, model.config.vocab_size, (8, 96), generator=generator)
optimiser = torch.optim.AdamW(model.parameters(), lr=3e-4)
for _ in range(3):
    optimiser.zero_grad()
    model(input_ids=ids, labels=ids).loss.backward()
    optimiser.step()
with torch.no_grad():
    probs = torch.softmax(model(input_ids=ids[:, :48]).logits[:, -1].float(), dim=-1)
    sampled = torch.multinomial(probs, 4, generator=generator)
digest = hashlib.sha256()
for name, tensor in sorted(model.state_dict().items()):
    digest.update(name.encode()); digest.update(tensor.detach().contiguous().numpy().tobytes())
digest.update(sampled.numpy().tobytes())
print("SHA256", digest.hexdigest(), torch.backends.cpu.get_cpu_capability())
"""

QUICKSTART = """
import sys
from rspo_gym.cli import main
code = main(["quickstart", "--iterations", "{iterations}", "--eval-tasks", "2", "--eval-episodes", "1",
             "--eval-every", "0", "--output-dir", {out!r}, "--cpu-capability", {capability!r}])
if code:
    sys.exit(code)
from rspo_gym.quickstart import weights_sha256
import torch
print("SHA256", weights_sha256({out!r} + "/policy"), torch.backends.cpu.get_cpu_capability())
"""

DRRN = """
import hashlib
import torch
import rspo_gym.cli as cli
{unpin}
code = cli.main(["train", "--env", "rspo/WebShop-v0", "--algo", "grpo", "--model", "drrn", "--iterations", "{iterations}",
                 "--group-size", "4", "--num-groups", "4", "--set", "eval_every=0", "--set", "progress=false", "--output-dir", {out!r}])
if code:
    raise SystemExit(code)
state = torch.load({out!r} + "/policy/action_scorer.pt", weights_only=True)["model"]
digest = hashlib.sha256()
for name, tensor in sorted(state.items()):
    digest.update(name.encode()); digest.update(tensor.contiguous().numpy().tobytes())
print("SHA256", digest.hexdigest(), torch.backends.cpu.get_cpu_capability())
"""


def fingerprint(workload: str, variant: str, pinned: bool, iterations: int, scratch: Path) -> tuple[str, str, float]:
    """Run ``workload`` under ``variant`` in a fresh process: (sha256, ATen's kernels, seconds)."""
    env_vars, prelude = VARIANTS[variant]
    env = {key: value for key, value in os.environ.items() if key not in SWITCHES}
    env.update(env_vars, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    if workload == "probe":
        code = prelude + PROBE.format(pin='from rspo_gym.quickstart import pin_cpu_kernels; pin_cpu_kernels("avx2")' if pinned else "")
    elif workload == "drrn":
        out = str(scratch / ("drrn-" + variant.replace(" ", "_").replace("=", "-")))
        code = prelude + DRRN.format(unpin="" if pinned else "cli._scorer_kernels = lambda model: None  # the CPU's own paths",
                                     iterations=iterations, out=out)
    else:
        out = str(scratch / variant.replace(" ", "_").replace("=", "-"))
        code = prelude + QUICKSTART.format(iterations=iterations, out=out, capability="avx2" if pinned else "native")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    line = next((line for line in done.stdout.splitlines() if line.startswith("SHA256 ")), None)
    if done.returncode or line is None:
        raise RuntimeError(f"{variant}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    _, sha, capability = line.split()
    return sha, capability, seconds


def cpu_model() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "unknown")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("probe", "quickstart", "drrn"), default="probe")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--pinned", dest="pinned", action="store_true", default=True, help="the quick start's pins on (default)")
    mode.add_argument("--native", dest="pinned", action="store_false", help="no pins: each variable takes effect")
    parser.add_argument("--iterations", type=int, default=2, help="quick start or drrn iterations")
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS), metavar="VARIANT")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    flags = " ".join(os.environ.get(key, "") and f"{key}={os.environ[key]}" for key in SWITCHES).strip()
    print(f"CPU: {cpu_model()}; workload {args.workload}, {'pinned' if args.pinned else 'native'}"
          + (f"; ignored from the environment: {flags}" if flags else ""), flush=True)
    print("| variant | sha256 (first 16) | same as first | ATen kernels | seconds |\n|---|---|---|---|---|", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="numeric-portability-") as scratch:
        for variant in args.variants:
            sha, capability, seconds = fingerprint(args.workload, variant, args.pinned, args.iterations, Path(scratch))
            rows.append({"variant": variant, "sha256": sha, "cpu_capability": capability, "seconds": round(seconds, 1)})
            same = "yes" if sha == rows[0]["sha256"] else "**no**"
            print(f"| {variant} | `{sha[:16]}` | {same} | {capability} | {seconds:.1f} |", flush=True)
    distinct = len({row["sha256"] for row in rows})
    print(f"{distinct} distinct fingerprint{'s' if distinct > 1 else ''} over {len(rows)} variants")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu_model(), "workload": args.workload, "pinned": args.pinned, "rows": rows},
                                        indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
