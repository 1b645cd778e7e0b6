"""What torch's NCCL flight recorder and ``NCCL_DEBUG=INFO`` would show on GPUs, as text.

These tools need NVIDIA GPUs and the NCCL backend; none of them runs here. Each record of
:data:`GPU_TOOLS` says how it is turned on, what it shows, and the *format* of what it prints or
writes, with placeholders in angle brackets (``<rank>``): no number in it was measured. The fixed
text of each format is quoted from the source named in the record's ``source``:

* the flight recorder's dump keys and the analyser's report lines: torch's own
  ``torch/distributed/flight_recorder/components/`` (``loader.py``, ``types.py``, ``utils.py``:
  what ``fr_trace`` reads and logs), in this torch;
* the environment variables: PyTorch's "ProcessGroupNCCL Environment Variables" page
  (``TORCH_NCCL_TRACE_BUFFER_SIZE``, ``TORCH_NCCL_DUMP_ON_TIMEOUT``,
  ``TORCH_FR_DUMP_TEMP_FILE``, the newer name of ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``) and the
  tutorial "Flight Recorder for Debugging Stuck Jobs";
* NCCL's log lines: NCCL's ``src/debug.cc`` (the ``<host>:<pid>:<tid> [<dev>] NCCL INFO`` prefix),
  ``src/graph/rings.cc`` (``Channel %02d/%02d :``) and ``src/enqueue.cc`` (the ``NCCL_COLL`` line
  of each collective); NCCL's documentation, "Environment Variables" (``NCCL_DEBUG``,
  ``NCCL_DEBUG_SUBSYS``).

The analyser is ``python -m torch.distributed.flight_recorder.fr_trace <dir>``, also installed as
the ``torchfrtrace`` command (torch's ``entry_points.txt``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..core.i18n import N_, _
from ..core.shown import shown

NOT_RUN = N_("not run here: needs NVIDIA GPUs")


@dataclass(frozen=True)
class GpuTool:
    """One tool: ``title`` and ``shows`` (English, marked ``N_``), ``setting`` (the environment
    variables or command, as typed), ``sample`` (the format of its output, placeholders in
    ``<>``), ``source`` (where that format is quoted from)."""

    title: str
    setting: str
    shows: str
    sample: str
    source: str
    run_here: str = NOT_RUN


FR_RECORD = GpuTool(
    title=N_("NCCL flight recorder: record"),
    setting="TORCH_NCCL_TRACE_BUFFER_SIZE=2000",
    shows=N_(
        "each rank keeps its last 2000 collectives and point-to-point operations in a ring: "
        "process group, sequence number, operation, sizes, dtypes, state and the Python stack "
        "that issued it (0, the default, keeps none)"
    ),
    sample=(
        '{"version": <version>, "pg_config": {<pg>: {"name": <name>, "desc": <desc>, '
        '"ranks": <ranks>}}, "entries": [{"record_id": <id>, "pg_id": <pg>, '
        '"collective_seq_id": <seq>, "p2p_seq_id": <seq>, "profiling_name": "nccl:<op>", '
        '"input_sizes": [<shape>], "input_dtypes": [<dtype>], "state": <state>, '
        '"time_created_ns": <ns>, "frames": [<stack>]}, ...]}'
    ),
    source="torch/distributed/flight_recorder/components/loader.py, types.py",
)
FR_DUMP = GpuTool(
    title=N_("NCCL flight recorder: dump on timeout"),
    setting="TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=/tmp/fr/nccl_trace_rank_",
    shows=N_(
        "when NCCL's watchdog times a collective out, every rank writes its record to a file "
        "named by the prefix and its rank (needs TORCH_NCCL_TRACE_BUFFER_SIZE > 0)"
    ),
    sample="/tmp/fr/nccl_trace_rank_<rank>",
    source="PyTorch docs: ProcessGroupNCCL Environment Variables",
)
FR_TRACE = GpuTool(
    title=N_("NCCL flight recorder: analysis"),
    setting="python -m torch.distributed.flight_recorder.fr_trace /tmp/fr  # or: torchfrtrace",
    shows=N_(
        "matches the ranks' entries by sequence number per process group and names the first "
        "collective that not every rank joined (its missing ranks), or that ranks called with "
        "another operation, size or dtype; -j prints every entry"
    ),
    sample=(
        "Not all ranks joining collective, sequence number: <seq>\n"
        "internal record id: <id>\n"
        "group info: <pg name>:<pg desc>\n"
        "collective: nccl:<op>\n"
        "missing ranks: {<rank>}\n"
        "input sizes: [<shape>]\n"
        "output sizes: [<shape>]\n"
        "world size: <n>\n"
        "expected ranks: {<rank>, ...}\n"
        "collective state: <state>"
    ),
    source="torch/distributed/flight_recorder/components/utils.py, types.py",
)
NCCL_INFO = GpuTool(
    title=N_("NCCL_DEBUG=INFO"),
    setting="NCCL_DEBUG=INFO",
    shows=N_(
        "NCCL's version, the network it chose and the rings and trees it built for each "
        "communicator, every line prefixed by host, process, thread and GPU"
    ),
    sample="<host>:<pid>:<tid> [<gpu>] NCCL INFO Channel <c>/<channels> : <rank> <rank> <rank>",
    source="NCCL src/debug.cc, src/graph/rings.cc",
)
NCCL_COLL = GpuTool(
    title=N_("NCCL_DEBUG_SUBSYS=COLL"),
    setting="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL",
    shows=N_(
        "one line per collective as each rank enqueues it: its number on the communicator "
        "(opCount), element count, datatype, reduction and root; the rank without a line for "
        "the opCount the others reached is the one that never entered it"
    ),
    sample=(
        "<host>:<pid>:<tid> [<gpu>] NCCL INFO AllReduce: opCount <n> sendbuff <ptr> recvbuff "
        "<ptr> count <elements> datatype <type> op <op> root <root> comm <ptr> [nranks=<n>] "
        "stream <ptr>"
    ),
    source="NCCL src/debug.cc, src/enqueue.cc",
)
GPU_TOOLS: tuple[GpuTool, ...] = (FR_RECORD, FR_DUMP, FR_TRACE, NCCL_INFO, NCCL_COLL)


def gpu_tools_table() -> pd.DataFrame:
    """One row per tool of :data:`GPU_TOOLS`, in the learner's language (the headers when shown,
    code indexes them in English: ``table["setting"]``)."""
    rows = [
        {
            N_("tool"): _(t.title),
            N_("setting"): t.setting,
            N_("what it shows"): _(t.shows),
            N_("output format (placeholders in <>)"): t.sample,
            N_("source of the format"): t.source,
            N_("run here"): _(t.run_here),
        }
        for t in GPU_TOOLS
    ]
    return shown(pd.DataFrame(rows))
