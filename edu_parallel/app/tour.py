"""``edu-parallel tour``: the first lesson in the terminal. Start a cluster, run the ring
all-reduce, read its trace, see a failure reported, take a short quiz. No browser needed."""

from __future__ import annotations

from pathlib import Path

from .. import comm, engine
from ..core.errors import WorkerError, check_int
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
    lines = ["input " + "  ".join(f"r{r} {chunk_cells(latest[r], bounds, n)}" for r in range(n))]
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
    say("edu-parallel tour: distributed communication, run for real\n")
    say(f"1. Start a cluster: {n} worker processes join one torch.distributed group.")
    with engine.Cluster(n, timeout=10) as cluster:
        say(
            f"   ready in {cluster.startup_s:.2f} s ({cluster.start_method}, backend"
            f" {cluster.backend})"
        )
        for h in cluster.run(demos.hello).results:
            say(f"   rank {h['rank']}: pid {h['pid']}, device {h['device']}")
        say(
            "\n2. Run a concept: ring all-reduce, 64 bytes per rank. Rank r's input is 2^r"
            " everywhere,"
        )
        say("   so every partial sum tells which ranks it holds (digits; '·' = not yet).")
        report = comm.run_allreduce(cluster, 16 * n, "int64", "ring", pattern="powers_of_two")
        for line in ascii_steps(report.trace):
            say("   " + line)
        say(
            "   reduce-scatter: each chunk gathers all ranks on one rank; all-gather: copies"
            " travel on."
        )
        say(f"\n3. Read the trace: {len(report.trace.events)} events. The first few:")
        for line in report.trace.lines()[:6]:
            say("   " + line)
        formula = report.formula_sent_bytes[0]
        say(
            f"   bytes sent per rank: {report.per_rank_sent_bytes}; formula 2(N-1)/N*D ="
            f" {formula:g}"
        )
        say(f"   matches dist.all_reduce: {report.matches_builtin}")
        say("\n4. When a rank fails, the error names the rank and its step:")
        try:
            cluster.run(demos.raise_on, 1)
        except WorkerError as exc:
            say("   " + str(exc.args[0]))
        say(
            f"   ... and the cluster goes on: {len(cluster.run(demos.hello).results)} ranks answer."
        )
        say("\n5. Quiz (the predict-then-run question runs on these ranks)")
        quiz = tour_quiz(runner=comm.cluster_runner(cluster, pattern="random", dtype="float32"))
        run_in_terminal(quiz, print_fn=say, interactive=interactive)
    say(
        "\nNext: `edu-parallel lab` opens the lessons; `edu-parallel run ring --help` shows the"
        " options."
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
