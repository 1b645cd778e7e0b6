"""Exercise 12: build the 3D mesh's process groups.

``my_mesh_groups(rank, dp, tp, pp)`` returns ``{"tp": [...], "dp": [...], "pp": [...]}``: the
global ranks of the three groups ``rank`` belongs to, each in order of that coordinate. The mesh is
(pp, dp, tp) with TP fastest, ``rank = (pp_rank·dp + dp_rank)·tp + tp_rank``: Megatron-LM's default
order (Narayanan et al. 2021, arXiv 2104.04473 §3) and torchtitan's
``init_device_mesh(..., (pp, dp, tp))``; :meth:`~edu_parallel.core.dims.ParallelDims.groups` is the
reference and :func:`~edu_parallel.parallel_3d.mesh.mesh_groups` builds them for lesson 12's runs.
TP groups are consecutive ranks, so on a node of g GPUs a TP group of t | g stays on NVLink.

Each rank calls the function for itself, on real ranks. Graded: every answer is well-formed (three
lists of ints in range, holding the rank, as long as the degrees); the ranks agree (if rank a
puts b in its TP group, b's TP group is the same list); the groups are the mesh's, with the usual
mistakes named (DP fastest, PP and DP swapped, a group out of order). Then the groups are used:
when the ranks agree, every rank calls ``new_group`` for every distinct group in one order (as
``torch.distributed`` requires) and all-reduces its rank in each of its groups; the sums must be
those of the mesh's groups. The trace shows each collective with its group (``attrs["group"]``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...core.trace import Trace
from ...engine.context import RankContext
from ...viz.figure import new_figure
from ..spec import Case, Exercise, Finding, RankOutcome

DIMS = ("tp", "dp", "pp")  # the order groups are checked, made and all-reduced in
LAYOUT = N_(
    "the mesh (pp, dp, tp), TP fastest: rank = (pp_rank\u00b7dp + dp_rank)\u00b7tp + tp_rank"
)


def mesh_groups(rank, dp, tp, pp):
    """The reference solution: the ranks that differ from ``rank`` in one coordinate only."""
    tp_rank = rank % tp  # TP is the fastest coordinate,
    dp_rank = rank // tp % dp  # then DP,
    pp_rank = rank // (tp * dp)  # PP the slowest
    return {
        "tp": [(pp_rank * dp + dp_rank) * tp + t for t in range(tp)],
        "dp": [(pp_rank * dp + d) * tp + tp_rank for d in range(dp)],
        "pp": [(p * dp + dp_rank) * tp + tp_rank for p in range(pp)],
    }


# ----------------------------------------------------------------------------- checks 1 and 2
def degrees(case: Case) -> dict[str, int]:
    return {d: case.option(d) for d in DIMS}


def answer_problem(answer: Any, rank: int, case: Case) -> str | None:
    """Why ``rank``'s answer is not three lists of ranks of the right sizes (None: it is)."""
    n, want = case.world_size, degrees(case)
    if not isinstance(answer, dict):
        return _(
            "rank {rank} returned {kind}, expected a dict {{'tp': [..], 'dp': [..], 'pp': [..]}}"
        ).format(rank=rank, kind=type(answer).__name__)
    missing = [d for d in DIMS if d not in answer]
    if missing:
        keys = ", ".join(map(repr, missing))
        return _(
            "rank {rank}'s answer has no key {keys}: return the keys 'tp', 'dp' and 'pp'"
        ).format(rank=rank, keys=keys)
    for d in DIMS:
        g, dim = answer[d], d.upper()
        if not isinstance(g, (list, tuple, range)):
            return _("rank {rank}'s {dim} group is {type}, expected a list of ranks").format(
                rank=rank, dim=dim, type=type(g).__name__
            )
        said = {"rank": rank, "dim": dim, "group": list(g)}
        bad = next((x for x in g if isinstance(x, bool) or not isinstance(x, int)), None)
        if bad is not None:
            return _(
                "rank {rank}'s {dim} group {group} holds {bad} ({type}): list int ranks"
            ).format(**said, bad=repr(bad), type=type(bad).__name__)
        out = next((x for x in g if not 0 <= x < n), None)
        if out is not None:
            return _(
                "rank {rank}'s {dim} group {group} holds rank {out}, outside 0..{last}"
            ).format(**said, out=out, last=n - 1)
        twice = next((x for x in g if list(g).count(x) > 1), None)
        if twice is not None:
            return _("rank {rank}'s {dim} group {group} lists rank {twice} twice").format(
                **said, twice=twice
            )
        if rank not in g:
            return _(
                "rank {rank}'s {dim} group {group} does not contain rank {rank} itself"
            ).format(**said)
        if len(g) != want[d]:
            msg = (
                _("rank {rank}'s {dim} group {group} has 1 rank; {d} = {want}, so it has {want}")
                if len(g) == 1
                else _(
                    "rank {rank}'s {dim} group {group} has {n} ranks; {d} = {want}, so it has "
                    "{want}"
                )
            )
            return msg.format(**said, n=len(g), d=d, want=want[d])
    return None


def disagreement(answers: list[dict[str, list[int]]]) -> tuple[int, str] | None:
    """The first rank b that rank a puts in its group while b's group differs: (b, message)."""
    for d in DIMS:
        for a, ans in enumerate(answers):
            for b in ans[d]:
                if answers[b][d] != ans[d]:
                    theirs = answers[b][d]
                    return b, _(
                        "rank {a} says its {dim} group is {mine} but rank {b} says {theirs}: every "
                        "member of a group must return the same list"
                    ).format(a=a, dim=d.upper(), mine=ans[d], b=b, theirs=theirs)
    return None


def clean(answer: dict[str, Any]) -> dict[str, list[int]]:
    return {d: list(answer[d]) for d in DIMS}


# ----------------------------------------------------------------------------- the rank side
def prepare(ctx: RankContext, case: Case) -> tuple[tuple[int, int, int, int], None]:
    return (ctx.rank, case.option("dp"), case.option("tp"), case.option("pp")), None


def drive(ctx: RankContext, case: Case, args: tuple, result: Any) -> dict[str, Any]:
    """Gather every rank's answer; when all are well-formed and agree, make the groups (every rank
    calls ``new_group`` for every distinct group, in one order) and all-reduce the rank in each
    of this rank's groups: ``{"sums": {dim: (group, sum)}}`` (None when not built)."""
    ok = answer_problem(result, ctx.rank, case) is None
    every: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(every, clean(result) if ok else None)
    if any(a is None for a in every) or disagreement(every) is not None:
        return {"sums": None}
    made, sums = [], {}
    for d in DIMS:
        for g in sorted({tuple(a[d]) for a in every}):
            if len(g) > 1:
                pg = dist.new_group(sorted(g))
                if ctx.rank in g:
                    made.append(pg)
                    t = torch.tensor([float(ctx.rank)])
                    ctx.collective("all_reduce", t, group=pg, phase=d)
                    sums[d] = (list(g), int(t.item()))
        sums.setdefault(d, ([ctx.rank], ctx.rank))  # a group of one: no collective
    ctx.barrier()  # every all-reduce is done before any group goes
    for pg in made:
        dist.destroy_process_group(pg)
    return {"sums": sums}


# ----------------------------------------------------------------------------- the judge
def mesh_of(case: Case) -> dict[str, list[list[int]]]:
    """Each rank's groups in the mesh: ``[rank] -> {dim: group}``."""
    dims = ParallelDims(case.world_size, **degrees(case))
    out = [dict.fromkeys(DIMS) for _x in range(case.world_size)]
    for d in DIMS:
        for g in dims.groups(d):
            for r in g:
                out[r][d] = g
    return out


def diagnose(case: Case, answers: list[dict[str, list[int]]]) -> Finding:
    """The first rank and dimension whose group is not the mesh's, with the likely mistake."""
    want = mesh_of(case)
    for d in DIMS:
        for r, (got, ref) in enumerate(zip(answers, want, strict=True)):
            g, w = got[d], ref[d]
            if g == w:
                continue
            gap = [x for x in range(min(g), max(g)) if x not in g]
            if d == "tp" and gap:
                msg = _(
                    "your TP group {group} skips rank {gap}: with TP fastest, TP groups are "
                    "consecutive ranks ({want}), so that on a node of g GPUs a TP group of t | g "
                    "stays on NVLink"
                ).format(group=g, gap=gap[0], want=w)
            elif d in ("dp", "pp") and got["dp"] == ref["pp"] and got["pp"] == ref["dp"]:
                msg = _(
                    "PP and DP are swapped: rank {r}'s DP group {dp} is its PP group and its PP "
                    "group {pp} its DP group. The mesh is (pp, dp, tp), PP slowest: a pipeline "
                    "stage is a block of dp\u00b7tp consecutive ranks, and DP replicas are tp "
                    "ranks apart"
                ).format(r=r, dp=got["dp"], pp=got["pp"])
            elif sorted(g) == sorted(w):
                msg = _(
                    "rank {r}'s {dim} group {group} holds the right ranks in the wrong order: "
                    "list them by their {dim} coordinate, {want}"
                ).format(r=r, dim=d.upper(), group=g, want=w)
            else:
                msg = _("rank {r}'s {dim} group is {group}; in {layout}, it is {want}").format(
                    r=r, dim=d.upper(), group=g, layout=_(LAYOUT), want=w
                )
            return Finding("result", False, msg, case, rank=r)
    return Finding("result", True, _("every rank's groups are the mesh's (pp, dp, tp)"), case)


def check_sums(case: Case, outputs: list[RankOutcome]) -> Finding:
    """Each rank's all-reduce of its rank over each of its groups, against the mesh group's sum."""
    want = mesh_of(case)
    for r, out in enumerate(outputs):
        for d in DIMS:
            g, got = out.facts["sums"][d]
            if got != sum(want[r][d]):
                msg = _(
                    "rank {r}'s all-reduce over its {dim} group {group} summed {got}; over the "
                    "mesh's {dim} group {mesh} it is {want}"
                ).format(
                    r=r, dim=d.upper(), group=g, got=got, mesh=want[r][d], want=sum(want[r][d])
                )
                return Finding("messages", False, msg, case, rank=r)
    ok = _("each group's all-reduce summed its mesh group's ranks")
    return Finding("messages", True, ok, case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    problems = [(r, answer_problem(o.result, r, case)) for r, o in enumerate(outputs)]
    bad = [(r, p) for r, p in problems if p is not None]
    if bad:
        msg = bad[0][1]
        if len(bad) > 1:
            msg = _("{problem} ({n} other ranks' answers are wrong too)").format(
                problem=msg, n=len(bad) - 1
            )
        return [Finding("result", False, msg, case, rank=bad[0][0])]
    answers = [clean(o.result) for o in outputs]
    split = disagreement(answers)
    if split is not None:
        return [Finding("result", False, split[1], case, rank=split[0])]
    return [diagnose(case, answers), check_sums(case, outputs)]


# ----------------------------------------------------------------------------- the picture
def group_table(case: Case, answers: list[Any]) -> list[list[int]]:
    """Per dimension, per rank: the lowest rank of its group (-1 where the answer is unusable)."""
    ok = [answer_problem(a, r, case) is None for r, a in enumerate(answers)]
    return [[min(a[d]) if good else -1 for a, good in zip(answers, ok, strict=True)] for d in DIMS]


def picture(grade: Any) -> list[Any]:
    """Your groups beside the mesh's: one row per dimension, each rank's cell coloured and
    labelled by its group (its lowest rank)."""
    case = grade.shown
    if case is None or not grade.outputs:
        return []
    rows = {
        _("yours"): group_table(case, [o.result for o in grade.outputs]),
        _("the mesh (pp, dp, tp)"): group_table(case, mesh_of(case)),
    }
    n = case.world_size
    fig = new_figure(figsize=(max(6.0, 0.7 * n + 2.0), 3.6), layout="constrained")
    for ax, (title, table) in zip(fig.subplots(2, 1), rows.items(), strict=True):
        ax.imshow(table, cmap="tab10", vmin=-1, vmax=n, aspect="auto")
        for i, row in enumerate(table):
            for r, low in enumerate(row):
                ax.text(r, i, "?" if low < 0 else f"{low}", ha="center", va="center", fontsize=8)
        ax.set_yticks(range(3), [d.upper() for d in DIMS])
        ax.set_xticks(range(n), [f"r{r}" for r in range(n)])
        ax.set_title(
            _("{who}: each rank's group, by its lowest rank").format(who=title), fontsize=10
        )
    return [fig]


STARTER = """\
def my_mesh_groups(rank, dp, tp, pp):
    # the mesh is (pp, dp, tp), TP fastest: rank = (pp_rank * dp + dp_rank) * tp + tp_rank
    tp_rank = ...
    dp_rank = ...
    pp_rank = ...
    return {"tp": [rank], "dp": [rank], "pp": [rank]}  # each: the ranks of my group, in order
"""


def _case(dp: int, tp: int, pp: int) -> Case:
    return Case(dp * tp * pp, options=(("dp", dp), ("tp", tp), ("pp", pp)))


EXERCISE = Exercise(
    lesson="12_3d_planner",
    title=N_("Build the 3D mesh's groups"),
    function="my_mesh_groups",
    params=("rank", "dp", "tp", "pp"),
    task=N_(
        "Write `my_mesh_groups(rank, dp, tp, pp)`: a dict `{'tp': [...], 'dp': [...], "
        "'pp': [...]}` of the global ranks in each of the three groups `rank` belongs to, each "
        "list in order of that coordinate. The mesh is (pp, dp, tp) with TP fastest: "
        "`rank = (pp_rank*dp + dp_rank)*tp + tp_rank`. Each rank calls it for itself; the "
        "grader checks that the ranks agree, that the groups are the mesh's, then makes them "
        "with `new_group` and all-reduces each rank's number in each group."
    ),
    starter=STARTER,
    hints=(
        N_(
            "A rank's TP group holds the ranks that share its PP and DP coordinates and differ "
            "only in the TP coordinate; the same for DP and PP. Start from rank's three "
            "coordinates."
        ),
        N_(
            "TP is the fastest coordinate: tp_rank = rank % tp, dp_rank = rank // tp % dp, pp_rank "
            "= rank // (tp*dp). Then vary one coordinate over its range and map each back to a "
            "rank with (p*dp + d)*tp + t."
        ),
        N_(
            "`'tp': [(pp_rank*dp + dp_rank)*tp + t for t in range(tp)]`, "
            "`'dp': [(pp_rank*dp + d)*tp + tp_rank for d in range(dp)]`, "
            "`'pp': [(p*dp + dp_rank)*tp + tp_rank for p in range(pp)]`"
        ),
    ),
    reference=mesh_groups,
    prepare=prepare,
    drive=drive,
    judge=judge,
    cases=(_case(2, 2, 1), _case(2, 2, 2), _case(2, 4, 1), _case(1, 2, 4)),
    timeout_s=10.0,  # eight processes on a 2-core laptop make and tear down up to 12 groups
    picture=picture,
)
