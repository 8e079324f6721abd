"""How torch uses the CPU, the same in a user's script as in the command line.

- ``prepare_process``: run by ``import rspo_gym``: OpenMP's idle threads sleep instead of spinning
  (``OMP_WAIT_POLICY=PASSIVE``) unless the environment says otherwise.
- ``variable_problems``: the thread and MKL variables set to values the libraries cannot use, one
  line each (the command line refuses them, a trainer warns).
- ``default_threads`` / ``user_chose_threads``: torch's own thread count, and whether the user
  asked for another one (``OMP_NUM_THREADS`` or ``torch.set_num_threads``).
- ``one_thread``: torch on one thread for a block, unless the user chose a count; the drrn scorer
  trains and plays in it.
- ``pin_scorer_kernels``: the code paths that make the drrn scorer's floats the same on every
  x86-64 CPU with AVX2, Intel's or AMD's, with or without AVX-512 (``rspo-gym train`` and ``eval``
  of a drrn model take them; a script calls it first); ``mkl_branch``: the branch MKL runs.

Why: torch's default is a thread per core, each spinning while it waits for the others. That pays
only when every thread has a core of its own. On a shared laptop or CI machine the threads spin on
cores other processes need (``benchmarks/thread_contention.py``: the README's trainer example took
9.2x its idle wall time beside 6 busy processes, 4.4x with the passive wait policy), and the drrn
scorer's matrices are too small to share out at all. The command line had both settings; a script
that imported ``rspo_gym`` had neither.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path

__all__ = ["prepare_process", "variable_problems", "default_threads", "user_chose_threads", "one_thread", "pin_scorer_kernels", "mkl_branch"]

#: OpenMP's wait policy unless the user set one: it changes no result, only who gets the CPU.
WAIT_POLICY = "PASSIVE"

#: ``OMP_NUM_THREADS`` as OpenMP reads it: a positive count, or a list of them (one per nesting
#: level; the first is torch's).
_THREADS_RE = re.compile(r"\s*([1-9][0-9]*)\s*(,\s*[1-9][0-9]*\s*)*")
#: ``MKL_CBWR`` as the MKL inside torch 2.13 reads it (oneMKL 2024.2): a branch name in capitals,
#: ``BRANCH=`` before it and ``,STRICT`` after it optional. Anything else (``avx2``, ``garbage``,
#: a leading space) silently runs its ``AUTO`` branch, whose floats are neither the default's nor
#: the named branch's.
_MKL_BRANCHES = ("AUTO", "COMPATIBLE", "SSE2", "SSE3", "SSSE3", "SSE4_1", "SSE4_2", "AVX", "AVX2",
                 "AVX512", "AVX512_E1", "AVX512_MIC", "AVX512_MIC_E1")
_CBWR_RE = re.compile(rf"(BRANCH=)?({'|'.join(_MKL_BRANCHES)})(\s*,\s*STRICT)?")


def prepare_process(environ: MutableMapping[str, str] = os.environ, modules: Mapping[str, object] = sys.modules) -> None:
    """Let OpenMP's idle threads sleep, unless the user chose a wait policy. OpenMP reads the
    variable once, when torch loads: where torch is already imported this changes nothing, and it
    is left unset rather than said to hold when it does not."""
    if "torch" not in modules:
        environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


def variable_problems(environ: Mapping[str, str] = os.environ) -> list[str]:
    """One line per variable whose value the libraries cannot use: torch ignores an unusable
    ``OMP_NUM_THREADS`` (0, -1, a word) and takes a thread per core; MKL runs an unknown
    ``MKL_CBWR`` as its ``AUTO`` branch, which changes every trained weight. Empty values count
    as unset, as the libraries read them.

    >>> variable_problems({"OMP_NUM_THREADS": "4", "MKL_CBWR": "COMPATIBLE"})
    []
    >>> variable_problems({"OMP_NUM_THREADS": "0"})[0].startswith("OMP_NUM_THREADS='0' is not")
    True
    """
    problems = []
    threads = environ.get("OMP_NUM_THREADS", "")
    if threads and not _THREADS_RE.fullmatch(threads):
        problems.append(f"OMP_NUM_THREADS={threads!r} is not a positive number of threads, so torch ignores it "
                        f"and takes a thread per core: unset it or give a count such as 1")
    branch = environ.get("MKL_CBWR", "")
    if branch and not _CBWR_RE.fullmatch(branch):
        problems.append(f"MKL_CBWR={branch!r} is not one of MKL's branches ({', '.join(_MKL_BRANCHES)}, in capitals, "
                        f"',STRICT' optional), so MKL runs its AUTO branch and changes every float: unset it or name one")
    return problems


def default_threads() -> int:
    """The thread count torch starts with when no variable sets one: a thread per physical core
    of the machine (it counts them with the cpuinfo library; hyper-threads of one core are one).
    Linux's topology files give the same count; elsewhere every logical CPU counts."""
    cores = set()
    for topology in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology"):
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip()))
        except OSError:
            continue
    return len(cores) or os.cpu_count() or 1


def user_chose_threads(current: int, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether torch's thread count ``current`` is the user's choice: a usable
    ``OMP_NUM_THREADS``, or a ``torch.set_num_threads`` call, seen as a count other than
    torch's default (a call that asked for the default looks like none)."""
    return bool(_THREADS_RE.fullmatch(environ.get("OMP_NUM_THREADS", "") or "-")) or current != default_threads()


@contextlib.contextmanager
def one_thread(environ: Mapping[str, str] = os.environ) -> Iterator[None]:
    """torch on one thread inside the block, unless the user chose a count (``user_chose_threads``);
    the count is restored after it, so a script's later work runs as it would have."""
    import torch

    before = torch.get_num_threads()
    if before == 1 or user_chose_threads(before, environ):
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: The drrn scorer's code paths: ATen's AVX2 kernels (a CPU with AVX-512 would take wider vectors,
#: which sum floats in other groups) and MKL's ``COMPATIBLE`` branch, the one MKL promises the
#: same results from on Intel and on other vendors' CPUs (its ``AVX2`` branch holds on Intel CPUs
#: only: MKL ignores it elsewhere). On one Xeon every other switch (FBGEMM's and oneDNN's
#: instruction sets, ``MKL_ENABLE_INSTRUCTIONS``) left the pinned weights' bits as they were
#: (``benchmarks/numeric_portability.py --workload drrn``).
SCORER_CPU_CAPABILITY = "avx2"
SCORER_MKL_BRANCH = "COMPATIBLE"
_MKL_CBWR_COMPATIBLE = 3  # mkl_cbwr_set's code for that branch (MKL's mkl_types.h)


def pin_scorer_kernels(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Run torch's AVX2 kernels and MKL's ``COMPATIBLE`` branch in this process, so the drrn scorer
    trains to the same floats on every x86-64 CPU with AVX2. The cost is small beside the scorer's
    Python work: GRPO on ALFWorld trained at 2,159-2,739 env steps per CPU second pinned against
    2,468-2,885 unpinned, interleaved runs on a 2-core Xeon at load 15-19, within that machine's
    noise (``benchmarks/fast_policy_speed.py --pinned-kernels`` measures it). Both are fixed for
    the whole process by torch's first vector kernel and MKL's first call: returns a one-line note
    where those came before (nothing changes then), else None. The environment is left as it was,
    so processes started later choose their own. A CPU without AVX2 keeps its kernels."""
    import torch

    if not _has_avx2():
        return None
    before = environ.get("ATEN_CPU_CAPABILITY")
    environ["ATEN_CPU_CAPABILITY"] = SCORER_CPU_CAPABILITY
    try:
        capability = torch.backends.cpu.get_cpu_capability()  # ATen reads the variable here, once per process
    finally:
        if before is None:
            del environ["ATEN_CPU_CAPABILITY"]
        else:
            environ["ATEN_CPU_CAPABILITY"] = before
    branch = _set_mkl_branch(_MKL_CBWR_COMPATIBLE)
    if capability == SCORER_CPU_CAPABILITY.upper() and branch in (SCORER_MKL_BRANCH, "n/a"):
        return None
    return (f"note: this process ran torch's {capability} kernels and MKL's {branch} branch before the drrn scorer, "
            f"not AVX2 and COMPATIBLE: its numbers may differ from another CPU's (run it in a fresh process)")


def _has_avx2() -> bool:
    """Whether the CPU runs AVX2 and FMA (Linux's CPU flags; elsewhere assumed absent, so nothing
    is pinned: ATen does not check the CPU it is told to use)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


def _set_mkl_branch(code: int) -> str:
    """Ask the MKL inside torch for branch ``code`` (it takes one only before its first call) and
    return the branch it runs: ``quickstart.mkl_branch``'s name, ``"n/a"`` without MKL."""
    import ctypes

    setter = _mkl_function("mkl_serv_cbwr_set")
    if setter is None:
        return "n/a"
    setter(ctypes.c_int(code))  # refused (and nothing changed) once MKL has run: the branch read back says
    return mkl_branch()


def _mkl_function(name: str) -> Callable[..., int] | None:
    """MKL's C function ``name`` from the MKL linked into torch's CPU library, returning an int;
    None where torch carries no MKL (macOS on Apple silicon, aarch64) or the symbol is missing."""
    import ctypes

    import torch

    if not torch.backends.mkl.is_available():
        return None
    libraries = sorted((Path(torch.__file__).parent / "lib").glob("*torch_cpu.*"))  # MKL is linked into it
    try:
        function = getattr(ctypes.CDLL(str(libraries[0])), name)
    except (IndexError, AttributeError, OSError):
        return None
    function.restype = ctypes.c_int
    return function


#: ``mkl_cbwr_get``'s branch codes (MKL's ``mkl_types.h``, ``MKL_CBWR_BRANCH_OFF`` to
#: ``MKL_CBWR_AVX512_E1``): what ``MKL_CBWR`` took effect as; a newer code is shown as its number.
MKL_BRANCHES = {1: "off", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
                10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}


def mkl_branch() -> str:
    """MKL's code branch in this process, as MKL reports it (``"off"``: MKL picks per CPU), or
    ``"n/a"`` where torch carries no MKL (macOS on Apple silicon, aarch64)."""
    import ctypes

    query = _mkl_function("mkl_serv_cbwr_get")
    if query is None:
        return "n/a"
    code = query(ctypes.c_int(1))  # MKL_CBWR_BRANCH
    return MKL_BRANCHES.get(code, str(code))
