"""What a pool's worker process is told: how many workers share the vector env's memory budgets.

``GroupedVectorEnv``'s process pool (``vector.SubprocessEnvs``) and its Ray pool
(``ray_pool.RayEnvs``) both call ``join_pool`` in each worker before it builds its envs; it sits
here, below both, so that neither pool's module imports the other's.
"""

from __future__ import annotations

import os

__all__ = ["WORKERS_ENV_VAR", "join_pool"]

#: set in each worker process to the number of workers of its pool (see the module docstring)
WORKERS_ENV_VAR = "RSPO_GYM_ENV_WORKERS"


def join_pool(num_workers: int) -> None:
    """Tell this worker process that it is one of ``num_workers``, before it builds its envs, so
    that process-wide caches take their share of the vector env's budget instead of all of it."""
    os.environ[WORKERS_ENV_VAR] = str(num_workers)
