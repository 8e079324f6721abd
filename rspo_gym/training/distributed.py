"""Data parallelism behind one seam: one process as always, or accelerate's engine across ranks.

- ``SingleProcess``: every collective is the identity; the trainer's numbers are bit-for-bit those
  of a trainer that knows nothing of ranks.
- ``Accelerated``: a process of a launched job (``accelerate launch`` or ``torchrun``). The
  strategy (DDP, FSDP2, DeepSpeed ZeRO-2/3) is accelerate's config; this module only calls
  accelerate's ``prepare`` / ``backward`` / ``no_sync`` / ``clip_grad_norm_`` and torch's
  collectives, so no algorithm has a code path per strategy.
- ``detect()``: ``Accelerated`` when the process was started by a launcher, else ``SingleProcess``.

The trainer splits work with it (design: whole task groups per rank, tasks from the global seed):
``groups(n)`` is this rank's contiguous share of the ``n`` groups of an iteration, and loss weights
use ``sum`` over ranks of row and token counts, so that an N-rank update equals a 1-rank update
over the same rows. Engines average gradients over ranks; ``backward`` multiplies the loss by
the number of ranks to turn that mean back into the sum the global weights expect.
"""

from __future__ import annotations

import os
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any, Hashable, Iterable, Iterator, Sequence

import torch

from rspo_gym.rollout.trajectory import rows_by_key

__all__ = ["SingleProcess", "Accelerated", "chain_order", "detect", "launched", "rank_minibatches"]

_LAUNCHER_VARIABLES = ("LOCAL_RANK", "ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED")


def launched() -> bool:
    """Whether a launcher started this process (torchrun and accelerate set ``LOCAL_RANK``)."""
    return any(name in os.environ for name in _LAUNCHER_VARIABLES)


def group_share(num_groups: int, world_size: int, rank: int) -> range:
    """Rank ``rank``'s contiguous share of ``num_groups`` groups (sizes differ by at most one).

    >>> [list(group_share(5, 2, r)) for r in range(2)]
    [[0, 1], [2, 3, 4]]
    """
    if num_groups < world_size:
        raise ValueError(
            f"{num_groups} task groups (num_groups, or evaluation tasks) for {world_size} ranks: "
            "every rank plays at least one whole group"
        )
    bounds = [num_groups * r // world_size for r in range(world_size + 1)]
    return range(bounds[rank], bounds[rank + 1])


def rank_minibatches(counts: Sequence[int], rank: int, mini_batch_size: int, order: torch.Tensor) -> list[torch.Tensor]:
    """This rank's rows (local indices) of each mini-batch one process would step on.

    ``counts`` are every rank's row counts; rows are numbered rank after rank, which is the one
    process's row order (ranks play contiguous shares of the groups). ``order`` is a permutation
    of all of them (the same on every rank: one seed), cut as one process cuts it: full
    mini-batches of ``mini_batch_size`` rows, then a short last one. Each rank keeps its rows of
    each, so N ranks take the same optimizer steps over the same rows as one process, whatever
    their shares (a rank may hold none of a step's rows: it then runs weight-0 passes).

    >>> [m.tolist() for m in rank_minibatches([2, 3], 1, 2, torch.tensor([4, 0, 2, 1, 3]))]
    [[2], [0], [1]]
    """
    start = sum(counts[:rank])
    end = start + counts[rank]
    return [chunk[(chunk >= start) & (chunk < end)] - start for chunk in order.split(mini_batch_size)]


def chain_order(chains: Sequence[Hashable], generator: torch.Generator) -> torch.Tensor:
    """A permutation of the rows that shuffles their chains (rows with equal keys) and keeps each
    chain's rows together, in their own order (``TrainerConfig.shuffle_chains``).

    >>> chain_order(["a", "b", "a", "c"], torch.Generator().manual_seed(0)).tolist()
    [3, 0, 2, 1]
    """
    groups = rows_by_key(chains)
    return torch.tensor([row for k in torch.randperm(len(groups), generator=generator).tolist() for row in groups[k]], dtype=torch.long)


class SingleProcess:
    """One process: the trainer as it always was (every collective is the identity)."""

    rank = 0
    world_size = 1
    is_main = True
    shards_state = False
    """Whether weights and optimizer state are sharded over ranks (FSDP, DeepSpeed): checkpoints
    then hold them in the engine's own format (``save_engine_state``), not in ``checkpoint.pt``."""

    def groups(self, num_groups: int) -> range:
        return range(num_groups)

    def prepare(self, policy, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        return optimizer

    def release(self, policy, optimizer: torch.optim.Optimizer) -> None:
        """Forget a policy's prepared modules and optimizer before they are replaced."""

    def sum(self, values: Sequence[float]) -> list[float]:
        return list(values)

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def max(self, value: int) -> int:
        return value

    def gather(self, items: list) -> list:
        return items

    def barrier(self) -> None:
        pass

    def accumulating(self, policy, last: bool):
        return nullcontext()

    def full_weights(self, policy):
        """A context in which ``policy``'s forward passes need no collective (see ``Accelerated``)."""
        return nullcontext()

    def full_state_dict(self, policy) -> dict[str, torch.Tensor]:
        """``policy``'s whole model state on the main rank (a collective where weights are sharded)."""
        return policy.model.state_dict()

    def close(self) -> None:
        """Leave the job's process group (nothing to leave in one process)."""

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def clip_grad_norm(self, parameters: Iterable[torch.nn.Parameter], max_norm: float) -> float:
        """``torch.nn.utils.clip_grad_norm_``: its total norm, and the gradients scaled by
        ``min(max_norm / (norm + 1e-6), 1)``, except that a factor of exactly 1 (the norm within
        ``max_norm``), a multiplication that changes no bit, is skipped for gradients on the CPU,
        where reading the factor needs no device sync; the pass over every gradient cost as much
        as the norm (the fast policy's dense embedding gradient is most of its parameters)."""
        parameters = list(parameters)  # a generator (a critic's ``parameters()``) is read twice
        grads = [p.grad for p in parameters if p.grad is not None]
        total_norm = getattr(torch.nn.utils, "get_total_norm", None)  # torch >= 2.6
        if total_norm is None or not grads or any(g.device.type != "cpu" for g in grads):
            return float(torch.nn.utils.clip_grad_norm_(parameters, max_norm))
        norm = total_norm(grads)
        if float(torch.clamp(max_norm / (norm + 1e-6), max=1.0)) != 1.0:  # NaN too, as torch scales by it
            torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
        return float(norm)


class Accelerated(SingleProcess):
    """A rank of a launched job, on accelerate's ``Accelerator`` and its process group.

    DDP runs with ``broadcast_buffers=False`` (a model's buffers are constants such as rotary
    frequencies; broadcasting them would make every forward pass a collective, and ranks run
    different numbers of no-grad passes).
    """

    def __init__(self) -> None:
        from accelerate import Accelerator
        from accelerate.utils import DistributedDataParallelKwargs

        # cpu=True where there is no GPU: accelerate otherwise takes a CPU job for one process
        self.accelerator = Accelerator(
            cpu=not torch.cuda.is_available(), kwargs_handlers=[DistributedDataParallelKwargs(broadcast_buffers=False)]
        )
        self.rank = self.accelerator.process_index
        self.world_size = self.accelerator.num_processes
        self.is_main = self.accelerator.is_main_process
        self.shards_state = self.accelerator.distributed_type.name in ("FSDP", "DEEPSPEED")

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    def groups(self, num_groups: int) -> range:
        return group_share(num_groups, self.world_size, self.rank)

    def prepare(self, policy, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Hand ``policy``'s model (and value head) with ``optimizer`` to the engine.

        The engine's wrappers become ``policy.train_model`` / ``policy.train_value_head``, through
        which every forward pass of the policy runs; ``policy.model`` stays the module generation
        reads (the same parameters under DDP; sharded in place under FSDP2).
        """
        modules = [policy.model] + ([policy.value_head] if policy.value_head is not None else [])
        prepared = self.accelerator.prepare(*modules, optimizer)
        if self.accelerator.distributed_type.name == "NO":  # one process, no engine: the plain paths
            return prepared[-1]
        policy.train_model = prepared[0]
        if policy.value_head is not None:
            policy.train_value_head = prepared[1]
        return prepared[-1]

    def release(self, policy, optimizer: torch.optim.Optimizer) -> None:
        """Drop them from accelerate's registries, which would otherwise keep every replaced RSPO
        explorer copy alive (as ``Accelerator.free_memory`` does for everything)."""
        gone = [m for m in (policy.train_model, policy.train_value_head, optimizer) if m is not None]
        self.accelerator._models = [m for m in self.accelerator._models if not any(m is g for g in gone)]
        self.accelerator._optimizers = [o for o in self.accelerator._optimizers if not any(o is g for g in gone)]

    def sum(self, values: Sequence[float]) -> list[float]:
        return self.sum_tensor(torch.tensor(list(values), dtype=torch.float64)).tolist()

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        reduced = tensor.detach().to(self.device, copy=True)
        torch.distributed.all_reduce(reduced)
        return reduced.to(tensor.device)

    def max(self, value: int) -> int:
        reduced = torch.tensor([value], device=self.device)
        torch.distributed.all_reduce(reduced, op=torch.distributed.ReduceOp.MAX)
        return int(reduced.item())

    def gather(self, items: list) -> list:
        """Every rank's ``items`` concatenated in rank order, on every rank."""
        parts: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(parts, items)
        return [item for part in parts for item in part]

    def barrier(self) -> None:
        self.accelerator.wait_for_everyone()

    def accumulating(self, policy, last: bool):
        """Gradients stay local until the last micro-batch of a step (DDP's ``no_sync``)."""
        stack = ExitStack()
        if not last:
            for module in (policy.train_model, policy.train_value_head):
                if module is not None:
                    stack.enter_context(self.accelerator.no_sync(module))
        return stack

    def full_weights(self, policy):
        """Under FSDP2, every shard group of ``policy``'s model gathered once, and kept whole, for
        the no-grad passes in it: generation and the old log-probs.

        Ranks play their own groups, so they run different numbers of those passes; a sharded
        forward pass gathers its weights collectively, so ranks would wait on each other's
        passes. Gathered up front (the same collectives on every rank), the passes are local, as
        under DDP, at the cost of whole weights for the duration (verl's rollout does the same).
        """
        if not getattr(self.accelerator, "is_fsdp2", False):
            return nullcontext()
        return _fsdp2_gathered(policy.model, self.accelerator.state.fsdp_plugin.reshard_after_forward)

    def full_state_dict(self, policy) -> dict[str, torch.Tensor]:
        """Collective: accelerate's ``get_state_dict`` gathers sharded weights (to the CPU)."""
        if not self.shards_state:
            return policy.model.state_dict()
        return self.accelerator.get_state_dict(policy.train_model or policy.model)

    def close(self) -> None:
        """Wait for every rank, then leave the process group. A rank that exits with the group
        still open can abort in gloo's or NCCL's teardown ("terminate called without an active
        exception") while another rank is still in its last collective."""
        if torch.distributed.is_initialized():
            self.barrier()
            torch.distributed.destroy_process_group()

    def save_engine_state(self, folder) -> None:
        """Every prepared model and optimizer in the engine's sharded format (collective)."""
        self.accelerator.save_state(str(folder))

    def load_engine_state(self, folder) -> None:
        self.accelerator.load_state(str(folder))

    def backward(self, loss: torch.Tensor) -> None:
        self.accelerator.backward(loss * self.world_size)

    def clip_grad_norm(self, parameters: list, max_norm: float) -> float:
        """accelerate's clip, except under FSDP2, where torch's own clip takes the sharded (DTensor)
        gradients directly: accelerate finds the prepared model by comparing parameter lists,
        which compares tensors elementwise, and fails, once a second model (the RSPO explorer) is
        prepared."""
        if getattr(self.accelerator, "is_fsdp2", False):
            norm = torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)
            return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
        norm = self.accelerator.clip_grad_norm_(parameters, max_norm)
        return float("nan") if norm is None else float(norm)  # DeepSpeed clips inside its step


@contextmanager
def _fsdp2_gathered(model: torch.nn.Module, reshard_after_forward: bool) -> Iterator[None]:
    """Unshard every FSDP2 module of ``model`` and keep it whole until the context ends."""
    from torch.distributed.fsdp import FSDPModule

    modules = [module for module in model.modules() if isinstance(module, FSDPModule)]
    for module in modules:
        module.unshard()
        module.set_reshard_after_forward(False, recurse=False)
    try:
        yield
    finally:
        for module in modules:
            module.reshard()
            module.set_reshard_after_forward(reshard_after_forward, recurse=False)


def detect() -> SingleProcess:
    """The seam of this process: ``Accelerated`` under a launcher, else ``SingleProcess``."""
    return Accelerated() if launched() else SingleProcess()
