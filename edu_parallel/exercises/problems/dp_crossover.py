"""Exercise 11: write data parallelism's roofline, the tokens at which its step stops being
communication-bound.

``my_dp_crossover(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, bandwidth)``
returns the tokens per rank per step ``T*`` at which one rank's compute, ``T W / F`` (``W`` FLOPs
per token), takes as long as its ring all-reduce of the gradients, ``2(N-1) α + 2(N-1)/N D / B``
(the Scaling Book's roofline, "All About Rooflines"; Thakur, Rabenseifner & Gropp 2005 for the
ring). Below ``T*`` the all-reduce is longer: the step is communication-bound.

Graded on 2 ranks against the engine: the first case runs lesson 11's sweep
(:func:`~edu_parallel.roofline.steps.sweep_job`) on the ranks and hands the learner this machine's
measured ``F``, ``α`` and ``B``; the learner's ``T*`` is compared with the reference formula's
(within 1 %) and with the crossover measured in the same run (within 30 %; on a noisy machine a
miss there is a note, not a failure: the formula is what the learner writes). The other cases
are an H100 cluster's numbers (8 GPUs across nodes, NDR) and a latency-bound one, where a
missing ``α`` term shows.
"""

from __future__ import annotations

import math
from typing import Any

import torch.distributed as dist

from ...core.i18n import N_, _
from ...core.trace import Trace
from ...engine.context import RankContext
from ...roofline.config import SweepConfig
from ...roofline.formulas import dp_step_flops
from ...roofline.gpu import ACROSS, H100_FLOPS
from ...roofline.steps import sweep_job
from ...roofline.sweep import read_sweep
from ...viz.roofline import crossover_time_figure
from ..spec import Case, Exercise, Finding, RankOutcome

SWEEP = {"repeats": 6}  # lesson 11's sweep, fewer rounds
FORMULA_TOLERANCE, MEASURED_TOLERANCE = 0.01, 0.30
H = 8192  # the GPU case: 8 transformer layers of width h, bf16 gradients
GPU_ARGS = (6 * 12 * H * H * 8, 12 * H * H * 8 * 2, 8, H100_FLOPS, ACROSS.alpha_s, 50e9)
LATENCY_ARGS = (6 * 8 * 64 * 64, 8 * 64 * 64 * 4, 4, 20e9, 150e-6, 2e9)  # one small block
_SWEEPS: dict[int, dict[str, Any]] = {}  # this rank's last sweep, from prepare to finish


def dp_crossover(
    flops_per_token: float,
    gradient_bytes: float,
    world_size: int,
    flops_per_s: float,
    alpha: float,
    bandwidth: float,
) -> float:
    """The reference: ``T* = F (2(N-1) α + 2(N-1)/N D / B) / W``."""
    n = world_size
    allreduce = 2 * (n - 1) * alpha + 2 * (n - 1) / n * gradient_bytes / bandwidth
    return flops_per_s * allreduce / flops_per_token


def measured_args(ctx: RankContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Run lesson 11's sweep on these ranks, read it on every rank (the events gathered), and
    drop its events from the exercise's trace: (the learner's arguments, the sweep's numbers)."""
    cfg = SweepConfig.build(ctx.world_size, **SWEEP)
    start = len(ctx.tracer.events)
    out = {}
    for rnd in range(cfg.repeats):
        out = sweep_job(ctx, cfg, rnd)
    mine = ctx.tracer.events[start:]
    del ctx.tracer.events[start:]
    every: list[Any] = [None] * ctx.world_size
    with ctx.tracer.paused():
        dist.all_gather_object(every, mine)
    report = read_sweep(cfg, out["params"], Trace({}, [e for part in every for e in part]))
    w = dp_step_flops(cfg.hidden, cfg.layers, 1)
    link = report.link
    args = (
        w,
        report.params * 4,
        ctx.world_size,
        report.flops_per_s,
        link.alpha_s,
        link.bandwidth_Bps,
    )
    report.trace = Trace({}, [])  # the figure reads the numbers, not the events
    return args, {"report": report, "measured": report.measured_crossover}


def prepare(ctx: RankContext, case: Case) -> tuple[tuple[Any, ...], None]:
    if case.option("run") == "sweep":
        args, facts = measured_args(ctx)
        _SWEEPS[ctx.rank] = facts
        return args, None
    return (GPU_ARGS if case.option("run") == "gpu" else LATENCY_ARGS), None


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> dict[str, Any]:
    """The arguments, and (sweep case, rank 0) the sweep's report for the judge and the figure."""
    facts: dict[str, Any] = {"args": args}
    if case.option("run") == "sweep" and ctx.rank == 0:
        facts.update(_SWEEPS.pop(ctx.rank))
    return facts


def _diagnosis(got: float, args: tuple) -> str:
    """What a near miss looks like: α left out, the ring's factor wrong, or seconds returned."""
    w, d, n, f, a, b = args
    guesses = {
        _("the α term is missing: each of the 2(N-1) ring messages pays it"): f
        * (2 * (n - 1) / n * d / b)
        / w,
        _("the ring sends 2(N-1)/N of the gradient per rank, not all of it"): f
        * (2 * (n - 1) * a + d / b)
        / w,
        _("that is the all-reduce's time in seconds; divide by the compute per token, W / F"): (
            2 * (n - 1) * a + 2 * (n - 1) / n * d / b
        ),
    }
    for text, value in guesses.items():
        if value and abs(got - value) <= FORMULA_TOLERANCE * abs(value):
            return text
    return _("compute T W / F equals the all-reduce 2(N-1) α + 2(N-1)/N D / B at T = T*")


def judge(case: Case, outputs: list[RankOutcome], trace: Any) -> list[Finding]:
    got, facts = outputs[0].result, outputs[0].facts
    if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
        msg = _("my_dp_crossover returned {value!r}: expected a number of tokens")
        return [Finding("result", False, msg.format(value=got), case)]
    want = dp_crossover(*facts["args"])
    if abs(got - want) > FORMULA_TOLERANCE * want:
        msg = _("your T* is {got} tokens, the formula's {want}: {why}").format(
            got=f"{got:,.1f}", want=f"{want:,.1f}", why=_diagnosis(got, facts["args"])
        )
        return [Finding("result", False, msg, case)]
    found = [
        Finding(
            "result",
            True,
            _("T* = {t} tokens per rank, as the formula").format(t=f"{got:,.1f}"),
            case,
        )
    ]
    if case.option("run") == "sweep":
        found.append(_against_measured(case, got, facts.get("measured")))
    return found


def _against_measured(case: Case, got: float, measured: float | None) -> Finding:
    """Within 30 % of the crossover measured on the ranks; a miss is the machine's noise."""
    if measured is None:
        msg = _("the sweep did not cross on this run (the machine was busy): run check again")
        return Finding("result", True, msg, case, note=True)
    off = got / measured - 1
    text = _("the ranks measured the crossover at {m} tokens; yours is {off} from it").format(
        m=f"{measured:.1f}", off=f"{off:+.0%}"
    )
    if abs(off) <= MEASURED_TOLERANCE:
        return Finding("result", True, text, case)
    noisy = _("{text}: two shared cores are noisy, run check again").format(text=text)
    return Finding("result", True, noisy, case, note=True)


def picture(grade: Any) -> list[Any]:
    """The measured sweep with the learner's T* on it."""
    facts = next((o.facts for o in grade.outputs if o.facts and "report" in o.facts), None)
    if facts is None:
        return []
    fig = crossover_time_figure(facts["report"], title=_("Your T* on the measured sweep"))
    got = grade.outputs[0].result if grade.outputs else None
    if isinstance(got, (int, float)) and got > 0:
        fig.add_vline(x=got, line_dash="dot", line_color="#2e7d32")
    return [fig]


STARTER = """\
def my_dp_crossover(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, bandwidth):
    n = world_size
    allreduce = 0.0  # seconds: the ring's 2(N-1) messages, each alpha, and its bytes over B
    compute_per_token = flops_per_token / flops_per_s  # seconds per token
    return allreduce / compute_per_token
"""

EXERCISE = Exercise(
    lesson="11_bytes_to_time",
    title=N_("Data parallelism's roofline: the crossover tokens"),
    function="my_dp_crossover",
    params=("flops_per_token", "gradient_bytes", "world_size", "flops_per_s", "alpha", "bandwidth"),
    task=N_(
        "Write `my_dp_crossover(flops_per_token, gradient_bytes, world_size, flops_per_s, alpha, "
        "bandwidth)`: the tokens per rank per step T* at which a rank's compute, T·W/F, takes as "
        "long as its ring all-reduce of the D gradient bytes, 2(N\u22121)·\u03b1 + "
        "2(N\u22121)/N·D/B. The first case runs the lesson's sweep on the ranks and gives you this "
        "machine's measured F, \u03b1 and B: your T* is compared with the formula (1 %) and with "
        "the crossover the ranks measured (30 %)."
    ),
    starter=STARTER,
    hints=(
        N_(
            "Below T*, the all-reduce takes longer than the compute. Compute grows with the "
            "tokens, the all-reduce does not: set the two times equal and solve for T."
        ),
        N_(
            "A ring all-reduce on N ranks sends 2(N\u22121) messages of D/N bytes: "
            "2(N\u22121)·\u03b1 + 2(N\u22121)/N·D/B seconds. One token costs W/F seconds."
        ),
        N_(
            "`allreduce = 2 * (n - 1) * alpha + 2 * (n - 1) / n * gradient_bytes / bandwidth`, "
            "then `return allreduce * flops_per_s / flops_per_token`"
        ),
    ),
    reference=dp_crossover,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=(
        Case(2, options=(("run", "sweep"),)),
        Case(2, options=(("run", "latency"),)),
        Case(2, options=(("run", "gpu"),)),
    ),
    timeout_s=40.0,
    picture=picture,
    progress=True,
)
