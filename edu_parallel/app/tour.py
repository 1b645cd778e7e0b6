"""``edu-parallel tour``: the first lesson in the terminal. Start a cluster, run the ring
all-reduce, read its trace, see a failure reported, take a short quiz. No browser needed."""

from __future__ import annotations

from pathlib import Path

from .. import comm, engine
from ..core.errors import WorkerError, check_int
from ..core.i18n import _
from ..core.inputs import contributors
from ..core.trace import Trace
from ..engine import demos
from ..quiz import run_in_terminal, tour_quiz
from ..viz import step_grid


def chunk_cells(values: list[float], bounds: list[int], world_size: int) -> str:
    """A rank's chunks as contributor strings: ``0·2·`` = ranks 0 and 2 summed into this chunk."""
    cells = []
    for k in range(len(bounds) - 1):
        who = set(contributors(values[bounds[k]])) if bounds[k + 1] > bounds[k] else set()
        cells.append("".join(str(r % 10) if r in who else "·" for r in range(world_size)))
    return " ".join(f"[{c}]" for c in cells)


def ascii_steps(trace: Trace) -> list[str]:
    """The state of every rank after every step, decoded from the snapshots of a
    ``powers_of_two`` run: each chunk shows which ranks' inputs it already holds."""
    n, bounds = trace.world_size, trace.meta["chunk_bounds"]
    latest = {s.rank: s.values for s in trace.snapshots if s.step == -1}
    phases = {e.step: e.phase for e in trace.events if e.step is not None}
    lines = [
        _("input") + " " + "  ".join(f"r{r} {chunk_cells(latest[r], bounds, n)}" for r in range(n))
    ]
    for step in sorted(phases):
        for s in trace.snapshots:
            if s.step == step:
                latest[s.rank] = s.values
        cells = "  ".join(f"r{r} {chunk_cells(latest[r], bounds, n)}" for r in range(n))
        lines.append(f"s{step:<2} {phases[step][:3]} {cells}")
    return lines


def run_tour(world_size: int = 4, interactive: bool | None = None, print_fn=print) -> int:
    n = check_int("world_size", world_size, 2, 8)
    say = print_fn
    say(_("edu-parallel tour: distributed communication, run for real") + "\n")
    say(_("1. Start a cluster: {n} worker processes join one torch.distributed group.").format(n=n))
    with engine.Cluster(n, timeout=10) as cluster:
        say(
            "   "
            + _("ready in {seconds} s ({start_method}, backend {backend})").format(
                seconds=f"{cluster.startup_s:.2f}",
                start_method=cluster.start_method,
                backend=cluster.backend,
            )
        )
        for h in cluster.run(demos.hello).results:
            say(
                "   "
                + _("rank {rank}: pid {pid}, device {device}").format(
                    rank=h["rank"], pid=h["pid"], device=h["device"]
                )
            )
        first, *rest = (
            _(
                "2. Run a concept: ring all-reduce, {size} bytes per rank. Rank r's input is 2^r"
                " everywhere,\n"
                "so every partial sum tells which ranks it holds (digits; '·' = not yet)."
            )
            .format(size=16 * n)
            .split("\n")
        )
        say("\n" + first)
        for line in rest:
            say("   " + line)
        report = comm.run_allreduce(cluster, 16 * n, "int64", "ring", pattern="powers_of_two")
        for line in ascii_steps(report.trace):
            say("   " + line)
        say(
            "   "
            + _(
                "reduce-scatter: each chunk gathers all ranks on one rank; all-gather: copies"
                " travel on."
            )
        )
        say(
            "\n"
            + _("3. Read the trace: {n} events. The first few:").format(n=len(report.trace.events))
        )
        for line in report.trace.lines()[:6]:
            say("   " + line)
        formula = report.formula_sent_bytes[0]
        say(
            "   "
            + _("bytes sent per rank: {sent}; formula 2(N-1)/N*D = {formula}").format(
                sent=report.per_rank_sent_bytes, formula=f"{formula:g}"
            )
        )
        ok = _("yes") if report.matches_builtin else _("NO")  # as the run's own report says it
        say("   " + _("matches dist.all_reduce: {ok}").format(ok=ok))
        say("\n" + _("4. When a rank fails, the error names the rank and its step:"))
        try:
            cluster.run(demos.raise_on, 1)
        except WorkerError as exc:
            say("   " + str(exc.args[0]))
        say(
            "   "
            + _("... and the cluster goes on: {n} ranks answer.").format(
                n=len(cluster.run(demos.hello).results)
            )
        )
        say("\n" + _("5. Quiz (the predict-then-run question runs on these ranks)"))
        quiz = tour_quiz(runner=comm.cluster_runner(cluster, pattern="random", dtype="float32"))
        run_in_terminal(quiz, print_fn=say, interactive=interactive)
    say(
        "\n"
        + _(
            "Next: `edu-parallel lab` opens the lessons; `edu-parallel run ring --help` shows the"
            " options."
        )
    )
    return 0


def save_readme_figure(out: str | Path, world_size: int = 4) -> Path:
    """The README picture: the step grid of a real ring all-reduce run (powers-of-two input)."""
    with engine.Cluster(check_int("world_size", world_size, 2, 8)) as cluster:
        report = comm.run_allreduce(
            cluster, 16 * world_size, "int64", "ring", pattern="powers_of_two"
        )
    fig = step_grid(report.trace)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    return out
