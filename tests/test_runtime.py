"""Rank/world/node from the environment, as torchrun, a scheduler or Slurm set it."""

from __future__ import annotations

import pytest

from rankzero.runtime import Runtime

RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "NNODES",
                  "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID", "SLURM_NNODES")


@pytest.fixture
def clean_env(monkeypatch):
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_single_process_defaults(clean_env):
    runtime = Runtime.from_env()
    assert (runtime.rank, runtime.world_size, runtime.local_rank, runtime.node_rank) == (0, 1, 0, 0)
    assert not runtime.is_distributed and runtime.is_main


def test_torchrun_variables(clean_env):
    for name, value in {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1"}.items():
        clean_env.setenv(name, value)
    runtime = Runtime.from_env()
    assert (runtime.rank, runtime.world_size, runtime.local_rank, runtime.local_world_size, runtime.node_rank) == (5, 8, 1, 4, 1)


def test_slurm_variables_when_torchrun_is_absent(clean_env):
    for name, value in {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2",
                        "SLURM_NODEID": "1"}.items():
        clean_env.setenv(name, value)
    runtime = Runtime.from_env()
    assert (runtime.rank, runtime.world_size, runtime.local_rank, runtime.local_world_size, runtime.node_rank) == (3, 4, 1, 2, 1)


def test_node_rank_derived_from_rank_and_bad_values_named(clean_env):
    for name, value in {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
        clean_env.setenv(name, value)
    assert Runtime.from_env().node_rank == 1
    clean_env.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        Runtime.from_env()
    clean_env.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="inconsistent"):
        Runtime.from_env()
