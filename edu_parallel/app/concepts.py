"""Every concept ``edu-parallel run`` knows, by name and alias: :data:`CONCEPTS`."""

from __future__ import annotations

from .async_concept import ASYNC
from .comm_concepts import COMM_CONCEPTS
from .compress_concept import COMPRESS
from .concept import Concept
from .ddp_concept import DDP
from .parallel_3d_concept import PARALLEL_3D
from .training_concepts import TRAINING_CONCEPTS

CONCEPTS: dict[str, Concept] = {
    name: concept
    for concept in (*COMM_CONCEPTS, DDP, COMPRESS, *TRAINING_CONCEPTS, PARALLEL_3D, ASYNC)
    for name in (concept.name, *concept.aliases)
}
