"""The engine: ranks that run jobs and record what they did.

* :class:`Cluster` (``cluster.py``): a persistent pool of forked ranks in a ``torch.distributed``
  group; :class:`TorchrunExecutor` (``torchrun.py``): the same interface inside a torchrun job.
  Both are :class:`~edu_parallel.engine.executor.Executor` s and return a :class:`RunResult`.
* :class:`RankContext` (``context.py``): what a job ``fn(ctx, ...)`` sees on its rank: traced
  sends, receives, collectives, compute and memory; ``recording.py``: its :class:`Tracer` and the
  handles of communication in flight.
* :func:`run_plan` (``execute.py``): a rank interprets a plan of ``plans/``.
* :class:`CommStream` (``stream.py``): a rank's communication stream, a thread that runs
  collectives in issue order while the rank computes (DDP's overlap of all-reduce and backward).
* ``worker.py`` and ``messages.py``: the worker process and what it says to the parent;
  ``status.py``: what each rank publishes in shared memory (its step, its pulse, its
  ``ctx.progress``), and ``progress.py``: the parent's reading of that progress;
  ``platform.py``: the backend and the process start method this machine allows;
  ``autograd.py``: backward from a received gradient without torch's first-call import of sympy.

Imports only ``core/`` and ``plans/``. Names load on first use (torch is imported then).
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "Cluster": "cluster",
    "MAX_WORLD_SIZE": "cluster",
    "Executor": "executor",
    "RunResult": "executor",
    "RankContext": "context",
    "Tracer": "recording",
    "run_plan": "execute",
    "replay_plan": "execute",
    "same_result": "execute",
    "CommStream": "stream",
    "TorchrunExecutor": "torchrun",
    "leave": "torchrun",
    "in_torchrun": "executor",
    "torchrun_dims": "executor",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
