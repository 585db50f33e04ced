"""Where this process stands: rank, world, node, CPU budget — read from the environment.

torchrun sets RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/GROUP_RANK; a cluster scheduler may set
only RANK/WORLD_SIZE/LOCAL_RANK (+ NODE_RANK) or Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID.
Nothing here touches torch.distributed: data preparation must work before (and without) a process
group, and waiting ranks must not sit in a collective.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass


def usable_cpu_count() -> int:
    """Cores this process may run on (affinity/cgroup-aware where the OS tells), at least 1."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        count = os.cpu_count() or 1
    return max(1, count)


def _env_int(*names: str, default: int | None = None) -> int | None:
    for name in names:
        raw = os.environ.get(name)
        if raw not in (None, ""):
            try:
                return int(raw)
            except ValueError:
                raise ValueError(f"environment variable {name}={raw!r}: expected a whole number") from None
    return default


@dataclass(frozen=True)
class Runtime:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    hostname: str

    @classmethod
    def from_env(cls) -> "Runtime":
        rank = _env_int("RANK", "SLURM_PROCID", default=0)
        world_size = _env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
        local_rank = _env_int("LOCAL_RANK", "SLURM_LOCALID", default=0)
        local_world_size = _env_int("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", default=None)
        if local_world_size is None:
            local_world_size = world_size if _env_int("NNODES", "SLURM_NNODES", default=1) == 1 else 1
        node_rank = _env_int("GROUP_RANK", "NODE_RANK", "SLURM_NODEID", default=None)
        if node_rank is None:
            node_rank = rank // max(1, local_world_size)
        if not (0 <= rank < world_size and 0 <= local_rank < max(local_world_size, local_rank + 1)):
            raise ValueError(f"inconsistent rank environment: RANK={rank} WORLD_SIZE={world_size} LOCAL_RANK={local_rank}")
        return cls(rank, world_size, local_rank, local_world_size, node_rank, socket.gethostname())

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def dataloader_workers(self, reserve: int = 1) -> int:
        """DataLoader workers per rank: this node's cores shared by its ranks, one kept for the main loop."""
        per_rank = usable_cpu_count() // max(1, self.local_world_size)
        return max(0, per_rank - reserve)


def job_key(runtime: "Runtime", scope: str) -> str:
    """Names this job (and node, for node-scoped builds) without any communication between ranks."""
    parts = [os.environ.get(name, "") for name in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                                    "MASTER_ADDR", "MASTER_PORT")]
    parts += [str(runtime.world_size), scope, str(runtime.node_rank) if scope == "node" else "*"]
    if not runtime.is_distributed:
        parts.append(f"{runtime.hostname}:{os.getpid()}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def env_number(name: str, default: int | float) -> int | float:
    """The environment variable `name` read as a number of `default`'s type, or `default` when unset."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return type(default)(raw)
    except ValueError:
        expected = "a whole number" if isinstance(default, int) else "a number"
        raise ValueError(f"environment variable {name}={raw!r}: expected {expected}") from None
