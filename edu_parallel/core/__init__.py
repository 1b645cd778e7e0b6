"""The bottom layer: pure data and checks that every other folder shares.

* ``i18n.py``: the learner's language (English or 简体中文): gettext's ``_()``, ``set_language``.
* ``errors.py``: one-line errors naming the option, the value and the valid range; the engine's
  error types. ``units.py``: sizes and dtypes as typed. ``dims.py``: :class:`ParallelDims`, the
  parallel degrees of a run, validated once.
* ``inputs.py``: each rank's input buffer (:class:`Buffer`), deterministic.
* ``trace.py``: :class:`Trace`, :class:`Event`, :class:`Snapshot`; ``schema.py``: the trace's
  vocabulary (event kinds, mark names, memory categories) and its ``meta`` keys;
  ``marks.py``: readers of marks (the all-to-all traffic matrix).
* ``metrics.py``: algbw and busbw as nccl-tests defines them, the ring volume of a collective.
* ``lazy.py``: how a folder loads its names on first use.
* ``workspace.py``: the learner's workspace folder and its ``.edu-parallel/`` state files.

Imports nothing else of the package, and never torch.
"""

from __future__ import annotations

from .dims import ParallelDims
from .errors import (
    ClusterClosedError,
    EngineError,
    JobTimeoutError,
    WorkerError,
    bad_value,
    check_choice,
    check_int,
    check_non_negative,
    check_positive,
)
from .inputs import PATTERNS, Buffer, chunk_bounds, contributors, make_input, numel_for
from .lazy import lazy_exports
from .marks import off_diagonal_sent, traffic_matrix
from .metrics import (
    BUS_FACTORS,
    algbw_gbps,
    bus_factor,
    bus_factor_source,
    busbw_gbps,
    ring_sent_bytes,
)
from .schema import META, MetaKey, meta_problems
from .trace import Event, Snapshot, Trace
from .units import DTYPES, INTEGER_DTYPES, check_dtype, format_bytes, parse_size
from .workspace import WORKSPACE_VAR, state_path, workspace_dir

__all__ = [
    "BUS_FACTORS",
    "DTYPES",
    "INTEGER_DTYPES",
    "META",
    "PATTERNS",
    "Buffer",
    "ClusterClosedError",
    "EngineError",
    "Event",
    "JobTimeoutError",
    "MetaKey",
    "ParallelDims",
    "Snapshot",
    "Trace",
    "WORKSPACE_VAR",
    "WorkerError",
    "algbw_gbps",
    "bad_value",
    "bus_factor",
    "bus_factor_source",
    "busbw_gbps",
    "check_choice",
    "check_dtype",
    "check_int",
    "check_non_negative",
    "check_positive",
    "chunk_bounds",
    "contributors",
    "format_bytes",
    "lazy_exports",
    "make_input",
    "meta_problems",
    "numel_for",
    "off_diagonal_sent",
    "parse_size",
    "ring_sent_bytes",
    "state_path",
    "traffic_matrix",
    "workspace_dir",
]
