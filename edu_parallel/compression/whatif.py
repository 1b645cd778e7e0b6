"""When does compression pay? One measured run's bytes, retimed for a large model on a link.

A compressor's wire bytes grow with the parameters (``Psi``) it compresses, so the bytes per
parameter per step that a run on the ranks counted from its trace (at its ``N``) carry over to a
model of ``psi`` parameters on ``N`` ranks: ``bytes = (measured / Psi_run) * psi``. On a link of
latency ``alpha`` and bandwidth ``B`` (:data:`~edu_parallel.models.topology.LINKS`):

* communication: ``messages * alpha + bytes / B``, with the run's messages per bucket and
  ``ceil(4 psi / 25 MiB)`` buckets (DDP's default cap);
* compute: ``6 psi T / F`` for ``T`` tokens per rank (Kaplan et al. 2020: 2 FLOPs per parameter
  per token forward, 4 backward), of which backward is two thirds;
* the compressor's own work: :data:`TOUCHED` bytes per parameter read and written in HBM at
  ``hbm_Bps`` (a model assumption, stated per method below; on a CPU this machine measured it);
* one step, with DDP's overlap: ``compute + compress + max(0, comm - backward)``: communication
  hides under backward until it is longer than backward.

Compression pays when the communication it removes was exposed: on slow links (Ethernet,
one InfiniBand port for a large model), not on NVLink, where backward already hides it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..core.errors import bad_value, check_positive, one_of
from ..core.units import MIB
from ..models.topology import LINKS

# HBM bytes read + written per parameter by each compressor (a model, not a measurement):
# error feedback p = g + e and e = p - C(p): 12 B; a cast fp32 -> 16 bit -> fp32: 12 B;
# top-k: |p| and a selection pass over it (8 B), gather and scatter (8 B); random-k: gather and
# scatter (8 B); sign: |p| mean, sign, unpack and sum (16 B); PowerSGD: M Q and M^T P read M
# twice, P Q^T writes it (12 B).
TOUCHED = {
    "none": 0,
    "fp16": 12,
    "bf16": 12,
    "topk": 16 + 12,
    "randk": 8 + 12,
    "sign": 16 + 12,
    "powersgd": 12 + 12,
}
DDP_BUCKET_BYTES = 25 * MIB
# the large model the what-if retimes, unless told otherwise: parameters, tokens per rank per
# step, bf16 FLOP/s a GPU sustains, and its memory bandwidth (an H100's HBM3)
LARGE_MODEL = {"psi": 1.5e9, "tokens": 8192, "flops_per_s": 400e12, "hbm_Bps": 3.35e12}


@dataclass(frozen=True)
class Measured:
    """What the what-if takes from a run: its method, ``N``, ``Psi``, bytes and messages."""

    label: str
    method: str
    world_size: int
    psi: int
    wire_bytes_per_step: float
    messages_per_step: float


def step_time(
    run: Measured,
    link: str,
    psi: float = LARGE_MODEL["psi"],
    tokens: int = LARGE_MODEL["tokens"],
    flops_per_s: float = LARGE_MODEL["flops_per_s"],
    hbm_Bps: float = LARGE_MODEL["hbm_Bps"],
) -> dict[str, float]:
    """Seconds of one step of a ``psi``-parameter model with ``run``'s compressor on ``link``."""
    if link not in LINKS:
        raise bad_value("link", link, one_of(LINKS))
    for name, value in (("psi", psi), ("tokens", tokens), ("flops_per_s", flops_per_s)):
        check_positive(name, value)
    check_positive("hbm_Bps", hbm_Bps)
    lk = LINKS[link]
    buckets = math.ceil(4 * psi / DDP_BUCKET_BYTES)
    nbytes = run.wire_bytes_per_step / run.psi * psi
    comm = run.messages_per_step * buckets * lk.alpha_s + nbytes / lk.bandwidth_Bps
    compute = 6 * psi * tokens / flops_per_s
    backward = compute * 2 / 3
    compress = TOUCHED[run.method] * psi / hbm_Bps
    step = compute + compress + max(0.0, comm - backward)
    return {"comm_s": comm, "compute_s": compute, "compress_s": compress, "step_s": step}


def what_if(
    runs: Sequence[Measured],
    links: Sequence[str] = ("nvlink4-h100", "ib-ndr-400", "eth-25g"),
    **model: float,
) -> pd.DataFrame:
    """One row per link and run: times and the speed-up over the uncompressed run (the first
    run whose method is ``none``) on that link."""
    base = next((r for r in runs if r.method == "none"), None)
    if base is None:
        raise bad_value("runs", [r.label for r in runs], "a list that holds a 'none' run")
    rows = []
    for link in links:
        ref = step_time(base, link, **model)["step_s"]
        for r in runs:
            t = step_time(r, link, **model)
            rows.append({"link": link, "method": r.label, **t, "speedup": ref / t["step_s"]})
    return pd.DataFrame(rows)
