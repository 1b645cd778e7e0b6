"""The device mesh of a 3D run: real process groups for every TP, DP and EP group of the ranks.

Ranks are laid out as :meth:`edu_parallel.core.dims.ParallelDims.coords` says, (pp, dp, tp) with
TP fastest: Megatron-LM's default order and torchtitan's mesh, the layout
``torch.distributed.device_mesh.init_device_mesh("cpu", (pp, dp, tp))`` gives. Every group of
every dimension is a ``torch.distributed`` process group made with ``new_group`` (which every
rank must call, in the same order, for every group, member or not). Pipeline neighbours talk
point to point on the default group, so PP needs no group of its own.

The groups live as long as the worker process: a persistent pool makes them once per layout.
EP is carved out of DP (Megatron-LM's convention): each DP group splits into blocks of ``ep``
consecutive ranks (the EP groups, all-to-all) and the ranks with the same place in their block
form the expert-DP groups ("edp": each expert's gradient is all-reduced there).
"""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from ..core.dims import ParallelDims

GROUPS = ("tp", "dp", "ep", "edp")  # PP talks point to point on the default group
_CACHE: dict[tuple[Any, ...], dict[str, Any]] = {}


def mesh_groups(dims: ParallelDims, rank: int) -> dict[str, Any]:
    """``{"tp", "dp", "ep", "edp"}`` -> the group of ``rank`` (None where it has one rank)."""
    world = dist.group.WORLD
    key = (id(world), dims.world_size, dims.dp, dims.tp, dims.pp, dims.ep, rank)
    if key not in _CACHE:
        mine: dict[str, Any] = {"tp": None, "dp": None, "ep": None, "edp": None}
        for dim in GROUPS:
            for ranks in dims.groups(dim):
                if len(ranks) > 1:
                    pg = dist.new_group(ranks)
                    if rank in ranks:
                        mine[dim] = pg
        _CACHE[key] = mine
    return _CACHE[key]
