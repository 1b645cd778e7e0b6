"""The learning task of lessons 13 and 14: a classifier that really learns, in seconds, offline.

A teacher-student problem (the standard controlled setting for optimisation experiments; see
e.g. Saad & Solla 1995): inputs ``x ~ N(0, I_32)``, labels ``argmax(x W*)`` for a fixed random
teacher ``W*`` (32 x 10, seed :data:`TEACHER_SEED`), so the classes are balanced and separable by
a linear map the student must discover. The student is the ``classifier`` member of the DDP model
family (``32 -> 128 -> 128 -> 10``, ReLU, 22,026 parameters; Psi in
:class:`~edu_parallel.data_parallel.config.DdpConfig`), trained with cross-entropy on a fresh
global batch of 64 samples per step (an endless stream: step ``t``'s batch comes from seed
``seed + 7919 t``), and scored on a fixed held-out set of :data:`HOLDOUT_ROWS` samples.

The stated target, checked by a test: plain synchronous SGD with ``lr =`` :data:`TASK_LR`
reaches :data:`TARGET_ACCURACY` held-out accuracy within :data:`TARGET_STEPS` steps, on any
number of ranks (the global batch is the same). Nothing is downloaded; every tensor comes from a
seeded ``torch.Generator``.
"""

from __future__ import annotations

import functools

import torch

from .targets import TARGET_ACCURACY, TARGET_STEPS, TASK_LR

__all__ = [  # the task's constants live in targets.py (torch-free) and are re-exported here
    "TARGET_ACCURACY",
    "TARGET_STEPS",
    "TASK_LR",
    "evaluate",
    "holdout",
    "labelled",
    "steps_to_target",
    "task_loss",
    "teacher",
]
D_IN, CLASSES = 32, 10
TEACHER_SEED = 12345
HOLDOUT_SEED = 999_983  # never a training step's seed (those are seed + 7919 t)
HOLDOUT_ROWS = 512


@functools.cache
def teacher() -> torch.Tensor:
    """The teacher's weights ``W*`` (32, 10): label = ``argmax(x @ W*)``."""
    return torch.randn(D_IN, CLASSES, generator=torch.Generator().manual_seed(TEACHER_SEED))


def labelled(seed: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` samples from seed ``seed``: inputs (rows, 32) fp32 and labels (rows,) int64."""
    x = torch.randn(rows, D_IN, generator=torch.Generator().manual_seed(seed))
    return x, (x @ teacher()).argmax(1)  # (rows, 32) @ (32, 10) -> (rows,)


@functools.cache
def holdout() -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed held-out set every run is scored on."""
    return labelled(HOLDOUT_SEED, HOLDOUT_ROWS)


def task_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of (b, 10) logits against (b,) labels."""
    return torch.nn.functional.cross_entropy(logits, labels)


def evaluate(model: torch.nn.Module) -> tuple[float, float]:
    """(held-out loss, held-out accuracy) of ``model``, without gradients."""
    x, y = holdout()
    with torch.no_grad():
        logits = model(x)  # (HOLDOUT_ROWS, 10)
        return float(task_loss(logits, y)), float((logits.argmax(1) == y).float().mean())


def steps_to_target(accuracies: list[float], target: float = TARGET_ACCURACY) -> int | None:
    """The first step (1-based) whose held-out accuracy reaches ``target``; None if none does."""
    return next((i + 1 for i, a in enumerate(accuracies) if a >= target), None)
