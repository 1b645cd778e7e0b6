"""The tests' shared helpers, defined once: the command line in a subprocess, a fresh interpreter
that must not load torch, a free port, a process's children. The fixtures are in ``conftest.py``.

``cli`` runs ``python -m edu_parallel`` as a learner runs ``edu-parallel`` (the console script is
``edu_parallel.app.cli:main``, see pyproject.toml), optionally under torchrun, which is
``python -m torch.distributed.run`` (https://pytorch.org/docs/stable/elastic/run.html); both keep
this interpreter and its virtual environment.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from edu_parallel.core.i18n import LANG_VAR

ROOT = Path(__file__).resolve().parent.parent  # the checkout
LOCALE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES")  # gettext reads these before LANG
LEARNER = "test-learner"  # the quizzes' learner under the ``fixed_learner`` fixture


def cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    lang: str | None = None,
    input: str | None = None,
    timeout: float = 120,
    cwd: Path | str = ROOT,
    torchrun: int = 0,
) -> subprocess.CompletedProcess:
    """``edu-parallel *args`` in a subprocess; the finished process, its output as text.

    env: the child's whole environment (default: this process's). lang: its
    ``EDU_PARALLEL_LANG``, with the locale variables removed so that only it decides. input: text
    on its stdin. timeout: seconds before ``subprocess.TimeoutExpired`` fails the test (a hang
    guard, not a speed goal: speed goals are in ``benchmarks/``). torchrun: run under
    ``torchrun --standalone --nproc-per-node N`` instead of alone.
    """
    child_env = dict(os.environ if env is None else env)
    if lang is not None:
        child_env = {k: v for k, v in child_env.items() if k not in LOCALE_VARS}
        child_env[LANG_VAR] = lang
    launcher = [sys.executable]
    if torchrun:
        launcher += ["-m", "torch.distributed.run", "--standalone"]
        launcher += ["--nproc-per-node", str(torchrun)]
    return subprocess.run(
        [*launcher, "-m", "edu_parallel", *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        cwd=cwd,
        env=child_env,
    )


def every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every sub-command's parser below it, once each."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += every_parser(sub)
    return out


def fresh_python(
    code: str, *, absent: Iterable[str] = ("torch",), timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run ``code`` in a new interpreter; fail the test unless it exits 0 and, when it ends, none
    of the ``absent`` modules (nor any of their submodules) is in ``sys.modules``.

    The check is appended to ``code``, so it sees everything ``code`` imported and ran; the
    finished process comes back for its stdout.
    """
    names = tuple(absent)
    check = (
        "\nimport sys as _sys\n"
        f"_loaded = sorted(m for m in _sys.modules for n in {names!r}"
        " if m == n or m.startswith(n + '.'))\n"
        "assert not _loaded, f'imported: {_loaded[:5]}'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code + check],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def free_port() -> int:
    """A loopback TCP port that nobody listens on (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_pids(pid: int | None = None) -> list[int]:
    """Live (non-zombie) processes whose parent is ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


class Recorder:
    """An executor that starts nothing: it records each ``run(fn, *args)`` and answers as a
    non-zero rank under torchrun does (None), so a runner returns right after handing its jobs
    their arguments. ``calls``: ``(fn, args)`` in order; ``sized(n)`` gives one of ``n`` ranks
    that records into the same list."""

    backend = "gloo"

    def __init__(self, world_size: int, calls: list | None = None):
        self.world_size = world_size
        self.calls: list[tuple] = [] if calls is None else calls

    def run(self, fn, *args, **kwargs):
        self.calls.append((fn, args))

    @contextlib.contextmanager
    def sized(self, n: int):
        yield Recorder(n, self.calls)


def count_checks(monkeypatch, cls: type) -> list:
    """Every instance of the :class:`~edu_parallel.core.errors.Checked` config ``cls`` whose
    ``_check`` runs from now on (each construction runs it once), in order."""
    counted: list = []
    original = cls._check

    def counting(self):
        counted.append(self)
        return original(self)

    monkeypatch.setattr(cls, "_check", counting)
    return counted


def no_process_cluster(monkeypatch) -> list:
    """:class:`~edu_parallel.engine.cluster.Cluster` starts no process from now on: its
    constructor runs as it does (``local_dims`` included) but forks nothing, and ``run(fn,
    *args)`` records ``(cluster, fn, args)`` and answers as a non-zero rank under torchrun does
    (None), so a runner returns right after handing its job the arguments. The records, in
    order. (Imported here, not at the top: the engine loads torch.)"""
    from edu_parallel.engine.cluster import Cluster

    records: list = []

    def run(self, fn, *args, **kwargs):
        records.append((self, fn, args))

    monkeypatch.setattr(Cluster, "_start", lambda self: None)
    monkeypatch.setattr(Cluster, "run", run)
    return records


def checked_names(monkeypatch) -> list:
    """The parameter name of every ``check_int`` call from now on, in every loaded
    ``edu_parallel`` module (each imported the function under its own name; each is patched):
    how many times a value is checked on its way somewhere, e.g. ``names.count("world_size")``."""
    from edu_parallel.core import errors

    original, names = errors.check_int, []

    def counting(name, value, *args):
        names.append(name)
        return original(name, value, *args)

    for module in list(sys.modules.values()):
        loaded = getattr(module, "__dict__", {})
        if getattr(module, "__name__", "").startswith("edu_parallel"):
            if loaded.get("check_int") is original:
                monkeypatch.setattr(module, "check_int", counting)
    return names


def independent_matrix(
    world: int, experts: int, top_k: int, c: float, skew: float, tokens: int, hidden: int
) -> list[list[int]]:
    """Kept assignments from rank s to the rank owning each expert, x h x 4 bytes, on one
    process: the MoE layer's traffic recomputed by routing its tokens here. (Imported here, not at
    the top: the experts load torch.)"""
    from edu_parallel.expert_parallel.experts import init_moe, make_tokens
    from edu_parallel.expert_parallel.router import route

    params = init_moe(experts, hidden, skew=skew)
    x, _ = make_tokens(world, tokens, hidden)
    per = experts // world
    m = [[0] * world for _ in range(world)]
    for s in range(world):
        r = route(x[s * tokens : (s + 1) * tokens], params.router, top_k, c)
        for e in r.experts[r.kept].tolist():
            m[s][e // per] += hidden * 4
    return m


def timed(name, p, m, v=1, t_f=1.0, t_b=1.0, t_w=0.0, t_comm=0.0):
    """The Timeline of schedule ``name`` on ``p`` ranks, ``m`` microbatches and ``v`` chunks, with
    these times per F, B, W and hop. (Imported here, not at the top, as the other helpers do.)"""
    from edu_parallel.pipeline_parallel.builders import build_schedule
    from edu_parallel.pipeline_parallel.timing import time_schedule

    return time_schedule(build_schedule(name, p, m, v), t_f, t_b, t_w, t_comm)


def boxes(fig) -> list[tuple[int, str, int, int, float, float]]:
    """(rank, kind, stage, microbatch, start, width) of every F/B/W box of a Gantt."""
    out = []
    for tr in fig.data:
        if (tr.meta or {}).get("role") != "box":
            continue
        assert len(tr.y) == len(tr.base) == len(tr.x) == len(tr.customdata) == len(tr.text)
        for y, base, width, (rank, stage, mb), text in zip(
            tr.y, tr.base, tr.x, tr.customdata, tr.text, strict=True
        ):
            assert y == rank and text.split("<br>")[0] == str(mb)
            out.append((int(rank), tr.meta["kind"], int(stage), int(mb), base, width))
    return sorted(out)


# A word of English prose: letters only (an apostrophe inside), with at most an opening
# parenthesis before and one punctuation mark after. Identifiers (all_reduce, dist.all_reduce,
# reduce-scatter, c0=, AllGatherGetBw's file src/all_gather.cu) and numbers are not words.
_ENGLISH_WORD = re.compile(r"\(?[A-Za-z]+(?:'[a-z]+)?[,;:.!?)]?")


# Runs of English words that a Chinese output shows and that are not prose, each for its reason,
# shared by the scans of the lessons (zh_outputs.py), the reports and the command line
SHOWN_NAMES = (
    "size count type",  # nccl-tests' own column names, as the bench tables print them
    "rank pp dp tp",  # each rank's mesh coordinates, named as ParallelDims and torch's DeviceMesh
    "rank ReduceScatter AllGather",  # the ring's bytes header: rank and the outline's phase names
)


def english_phrases(text: str, allow: Iterable[str] = ()) -> list[str]:
    """Every run of three or more English words in ``text`` (words: see ``_ENGLISH_WORD``,
    separated by spaces), except those that ``allow`` lists: what a Chinese output must not
    hold. ``english_phrases("rank 1 raised during job x")`` is ``["raised during job x"]``."""
    allowed = set(allow)
    found = []
    for line in text.splitlines():
        run: list[str] = []
        for token in [*line.split(), ""]:  # "" ends the last run of the line
            if token and _ENGLISH_WORD.fullmatch(token):
                run.append(token)
                continue
            phrase = " ".join(run)
            if len(run) >= 3 and phrase not in allowed:
                found.append(phrase)
            run = []
    return found


def plotly_outputs(nb) -> list[dict]:
    """The plotly figures (JSON) among the outputs of an executed notebook ``nb``, in order."""
    return [
        o["data"]["application/vnd.plotly.v1+json"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "application/vnd.plotly.v1+json" in o.get("data", {})
    ]
