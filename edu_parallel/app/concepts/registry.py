"""Every concept ``edu-parallel run`` knows, by name and alias: :data:`CONCEPTS`."""

from __future__ import annotations

from .async_training import ASYNC
from .base import Concept
from .comm import COMM_CONCEPTS
from .compression import COMPRESS
from .ddp import DDP
from .expert_parallel import MOE_CONCEPT
from .failure import FAILURE
from .parallel_3d import PARALLEL_3D
from .pipeline import PIPELINE
from .strategy_map import MAP
from .tensor_parallel import TP
from .zero import FSDP, ZERO

CONCEPTS: dict[str, Concept] = {
    name: concept
    for concept in (
        *COMM_CONCEPTS,
        DDP,
        COMPRESS,
        PIPELINE,
        ZERO,
        FSDP,
        MOE_CONCEPT,
        TP,
        MAP,
        PARALLEL_3D,
        ASYNC,
        FAILURE,
    )
    for name in (concept.name, *concept.aliases)
}
