"""``edu-parallel exercise``: list, check a file (exit 0 pass, 1 fail, 2 bad arguments), hint,
solution, each as a learner or an instructor would call it from a shell."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
from helpers import cli
from test_exercise_ring import off_by_one_chunk

from edu_parallel.exercises.problems.ring_allreduce import ring_allreduce

pytestmark = pytest.mark.multiprocess


def write(tmp_path, name: str, source: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def solution_file(tmp_path, fn, name="my_ring_allreduce"):
    """A learner's file: ``import torch`` and ``fn``'s source renamed to ``name``."""
    source = inspect.getsource(fn).replace(f"def {fn.__name__}(", f"def {name}(", 1)
    source = source.replace("ctx: RankContext", "ctx").replace("tensor: torch.Tensor", "tensor")
    source = source.replace(") -> torch.Tensor:", "):")
    return write(tmp_path, f"{fn.__name__}.py", "import torch\n\n\n" + source)


def test_check_passes_the_reference_and_records_it(tmp_path):
    env = {"EDU_PARALLEL_WORKSPACE": str(tmp_path)}
    good = solution_file(tmp_path, ring_allreduce)
    out = cli("exercise", "check", "03", str(good), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PASS exercise 03 (my_ring_allreduce): 5 cases on real ranks")
    assert len(out.stdout.splitlines()) < 40  # one screen
    listed = cli("exercise", "list", "--json", env=env)
    row = next(r for r in json.loads(listed.stdout) if r["id"] == "03")
    assert (row["status"], row["tries"]) == ("passed", 1)


def test_check_draws_the_feedback_picture_and_checks_its_path_first(tmp_path):
    env = {"EDU_PARALLEL_WORKSPACE": str(tmp_path)}
    bad = solution_file(tmp_path, off_by_one_chunk)
    out = cli("exercise", "check", "03", str(bad), "--figure", str(tmp_path / "f.png"), env=env)
    assert out.returncode == 1
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    wrong = cli("exercise", "check", "03", str(bad), "--figure", str(tmp_path / "f.jpg"), env=env)
    assert wrong.returncode == 2 and "--figure" in wrong.stderr and "ending in .png" in wrong.stderr
    listed = json.loads(cli("exercise", "list", "--json", env=env).stdout)
    assert next(r for r in listed if r["id"] == "03")["tries"] == 1  # the bad path ran nothing


def test_check_fails_a_wrong_ring_with_its_divergence_as_json(tmp_path):
    bad = solution_file(tmp_path, off_by_one_chunk)
    env = {"EDU_PARALLEL_WORKSPACE": str(tmp_path)}
    out = cli("exercise", "check", "03", str(bad), "--json", env=env)
    assert out.returncode == 1
    data = json.loads(out.stdout)
    assert data["exercise"] == "03" and data["passed"] is False
    wrong = [f for f in data["findings"] if not f["ok"]]
    assert wrong[0]["check"] == "result" and wrong[0]["case"] == "N=4, 16 \u00d7 float32"
    assert "after step 0 (reduce-scatter), rank 0's chunk 1" in wrong[1]["message"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "def helper(x):\n    return x\n",
            "defines no function `my_ring_allreduce` (it defines: helper)",
        ),
        ("def my_ring_allreduce(ctx, tensor)\n    return tensor\n", "line 1: expected ':'"),
        (
            "import torch\nraise RuntimeError('no')\n",
            "raised while loading at line 2: `raise Runtime",
        ),
        (
            "def my_ring_allreduce(ctx):\n    return 1\n",
            "cannot be called as my_ring_allreduce(ctx, tensor)",
        ),
    ],
)
def test_a_file_without_a_usable_function_fails_with_its_line(tmp_path, source, expected):
    path = write(tmp_path, "solution.py", source)
    out = cli("exercise", "check", "03", str(path), env={"EDU_PARALLEL_WORKSPACE": str(tmp_path)})
    assert out.returncode == 1, out.stderr
    assert expected in out.stdout and "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("check", "99", "x.py"), "error: exercise='99' is not valid: expected one of"),
        (
            ("check", "03", "missing.py"),
            "error: path='missing.py' is not valid: expected an existing",
        ),
        (
            ("hint", "03", "--tier", "0"),
            "error: --tier=0 is not valid: expected an integer in [1, 3]",
        ),
        (("solution", "3x"), "error: exercise='3x' is not valid"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, expected):
    out = cli("exercise", *args)
    assert out.returncode == 2
    assert out.stderr.startswith(expected) and len(out.stderr.splitlines()) == 1


def test_hint_and_solution_print_for_the_shell():
    hint = cli("exercise", "hint", "03", "--tier", "3")
    assert hint.returncode == 0 and hint.stdout.startswith(
        "exercise 03, hint 3 of 3: `ctx.wait_all("
    )
    solution = cli("exercise", "solution", "03")
    assert "def ring_allreduce(ctx: RankContext, tensor: torch.Tensor)" in solution.stdout
