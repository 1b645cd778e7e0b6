"""The quiz mechanism: question kinds, feedback and parsing, bookkeeping, the widget and the
terminal. Every bank of the registry is checked in ``test_quiz_registry.py``."""

from __future__ import annotations

import pytest
from helpers import fresh_python

from edu_parallel.quiz import (
    MultipleChoice,
    Numeric,
    PredictThenRun,
    Quiz,
    get_quiz,
    register_bank,
    ring_quiz,
    run_in_terminal,
    show_quiz,
    simulation_runner,
    tour_quiz,
)

pytestmark = pytest.mark.usefixtures("fixed_learner")  # one known learner, a tmp workspace


# ------------------------------------------------------------------ feedback and parsing
def test_numeric_feedback_says_expected_units_and_error():
    q = Numeric("bytes?", 786432, units="bytes", explanation="Because (N-1)/N * D per phase.")
    fb = q.check("768 KiB")
    assert fb.correct and fb.expected == "768 KiB (786,432 bytes)"
    assert fb.message.startswith("Correct") and fb.explanation.startswith("Because")
    fb = q.check("1 MiB")
    assert not fb.correct
    assert "Not quite" in fb.message and "768 KiB" in fb.message and "+33.33%" in fb.message
    assert "tolerance 1%" in fb.message and "1 MiB" in fb.given


@pytest.mark.parametrize(
    "text", ["1572864", "1,572,864", "1.5 MiB", "1.5MiB", "1536 KiB", "1536k", 1572864, 1.5 * 2**20]
)
def test_byte_answers_accept_units(text):
    q = Numeric("total?", 1572864, units="bytes", explanation="Two phases of (N-1)/N * D.")
    assert q.parse(text) == 1572864
    assert q.check(text).correct


def test_numeric_tolerances_and_units():
    q = Numeric("busbw?", 150.0, units="GB/s", explanation="busbw = algbw * 2(N-1)/N.")
    assert q.check("150 GB/s").correct and q.check(151).correct
    assert not q.check(153).correct
    exact = Numeric("steps?", 6, tolerance=0, units="steps", explanation="2(N-1) steps.")
    assert exact.check("6").correct and not exact.check(6.01).correct
    assert "exact" in exact.check(7).message
    absolute = Numeric("zero?", 0, tolerance=0, abs_tolerance=0.5, explanation="Nothing moves.")
    assert absolute.check(0.4).correct and not absolute.check(0.6).correct
    with pytest.raises(ValueError, match="answer="):
        q.check("a lot")
    with pytest.raises(ValueError, match="answer="):
        q.check("150 MiB")
    with pytest.raises(ValueError, match="answer="):
        Numeric("b", 1, units="bytes", explanation="x" * 10).check("3 parsecs")


def test_multiple_choice_answers_by_index_letter_and_text():
    q = MultipleChoice("Which?", ["red", "green", "blue"], 1, "Green is the answer here.")
    for answer in (1, "b", "B", "b)", "green"):
        assert q.check(answer).correct, answer
    fb = q.check("a")
    assert not fb.correct and "a) red" in fb.message and "b) green" in fb.expected
    with pytest.raises(ValueError, match="answer="):
        q.check("z")
    with pytest.raises(ValueError, match="answer="):
        q.check(3)
    with pytest.raises(ValueError, match="answer="):
        q.check("a, b")  # one answer only
    many = MultipleChoice("All?", ["x", "y", "z"], {0, 2}, "x and z hold.", multiple=True)
    assert many.check({0, 2}).correct and many.check("a, c").correct and many.check("ac").correct
    assert not many.check("a").correct and not many.check({0, 1, 2}).correct


# ------------------------------------------------------------------ bad arguments
@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: MultipleChoice("p", ["a", "b"], {0, 1}, "expl"), "correct="),
        (lambda: MultipleChoice("p", ["a", "b"], 2, "expl"), "correct="),
        (lambda: MultipleChoice("p", ["a", "b"], set(), "expl", multiple=True), "correct="),
        (lambda: MultipleChoice("p", ["a", "a"], 0, "expl"), "choices="),
        (lambda: MultipleChoice("p", ["a"], 0, "expl"), "choices="),
        (lambda: MultipleChoice("p", ["a", "b"], 0, ""), "explanation="),
        (lambda: MultipleChoice("", ["a", "b"], 0, "expl"), "prompt="),
        (lambda: Numeric("p", 1.0, tolerance=-0.1, explanation="expl"), "tolerance="),
        (lambda: Numeric("p", 1.0, abs_tolerance=-1, explanation="expl"), "abs_tolerance="),
        (lambda: Numeric("p", float("nan"), explanation="expl"), "answer="),
        (lambda: Numeric("p", 1.0), "explanation="),
        (lambda: PredictThenRun("p", "not a question", lambda: 1, str, "e"), "predict="),
        (
            lambda: PredictThenRun("p", Numeric("q", 1, explanation="e"), 5, str, "e"),
            "run=",
        ),
        (lambda: Quiz("t", []), "questions="),
        (lambda: Quiz("", [Numeric("q", 1, explanation="e")]), "title="),
        (lambda: ring_quiz(seed="one"), "seed="),
        (lambda: ring_quiz(runner=42), "runner="),
        (lambda: get_quiz("99_nothing"), "name="),
        (lambda: register_bank("", ring_quiz), "name="),
        (lambda: tour_quiz().answer(99, "a"), "index="),
    ],
)
def test_bad_arguments_name_the_parameter(make, name):
    with pytest.raises(ValueError, match=name):
        make()


# ------------------------------------------------------------------ quiz bookkeeping
def test_score_bookkeeping_and_text():
    quiz = ring_quiz()
    assert (quiz.score, quiz.total, quiz.answered) == (0, 9, 0)
    assert not quiz.answer(0, "1 MiB").correct
    assert quiz.answer(1, "1.5 MiB").correct
    assert (quiz.score, quiz.answered) == (1, 2)
    assert quiz.answer(0, "768 KiB").correct  # the latest answer counts
    assert quiz.score == 2 and quiz.attempts[:2] == [2, 1]
    with pytest.raises(ValueError, match="answer="):
        quiz.answer(2, "q")
    assert quiz.attempts[2] == 0 and quiz.results[2] is None
    assert quiz.summary() == "Lesson 03: ring all-reduce: Score: 2 / 9 (2 answered)"
    quiz.reset()
    assert quiz.score == 0 and quiz.answered == 0
    text = quiz.to_text()
    assert text.startswith("Lesson 03") and "1. Ring all-reduce" in text and "Answer:" not in text
    with_answers = quiz.to_text(answers=True)
    assert "Answer: 768 KiB (786,432 bytes)" in with_answers and "Why:" in with_answers
    assert not quiz.by_key("predict_allgather_rank0").has_run  # text never runs the engine


def test_predict_then_run_is_lazy_cached_and_graded_by_truth():
    calls = []

    def runner(world_size, nbytes):
        calls.append((world_size, nbytes))
        return simulation_runner(world_size, 2 * nbytes)  # a run that moves twice the bytes

    quiz = ring_quiz(runner=runner)
    q = quiz.by_key("predict_allgather_rank0")
    assert calls == []
    with pytest.raises(ValueError, match="answer="):
        q.check("soon")
    assert calls == []  # a typo does not start a run
    fb = q.check(q.predict.answer)  # the formula for D, but the run moved 2D
    assert q.params == {"N": 5, "D": 80 * 1024}  # not the lesson's 4 ranks
    assert not fb.correct and "128 KiB" in fb.expected  # 4/5 of 2D
    assert q.check("128 KiB").correct
    assert calls == [(5, 80 * 1024)]  # ran once, cached
    assert "all-gather" in fb.reveal


def test_predict_then_run_with_a_choice():
    q = PredictThenRun(
        "Which rank sends most?",
        MultipleChoice("Which rank?", ["rank 0", "rank 1"], 1, "The root sends most."),
        run=lambda: simulation_runner(2, 64),
        reveal=lambda t: f"sent {t.sent_bytes()}",
        truth=lambda t: 0,
    )
    assert q.predict_kind == "choice" and q.explanation == "The root sends most."
    assert q.check("a").correct and not q.check("b").correct
    assert q.check(0).reveal == "sent [64, 64]"  # 2 phases x 1 step x 32 B


# ------------------------------------------------------------------ widget, no browser
def test_widget_submit_by_button_click_updates_score():
    quiz = ring_quiz()
    w = show_quiz(quiz)
    import ipywidgets

    assert isinstance(w.widget, ipywidgets.VBox)
    assert w.score_label.value == "Score: 0 / 9"
    assert isinstance(w.inputs[2], ipywidgets.RadioButtons)
    assert isinstance(w.inputs[0], ipywidgets.Text)
    w.inputs[0].value = "768 KiB"
    w.buttons[0].click()
    assert "Correct" in w.feedback[0].value and "Why:" in w.feedback[0].value
    assert w.score_label.value == "Score: 1 / 9"
    w.inputs[2].value = quiz[2].position(1)  # the outline's double count
    w.buttons[2].click()
    assert "Not quite" in w.feedback[2].value and w.score_label.value == "Score: 1 / 9"
    boxes = w.inputs[7].children
    for k in (0, 1, 3):
        boxes[quiz[7].position(k)].value = True
    w.buttons[7].click()
    assert w.score_label.value == "Score: 2 / 9"
    w.inputs[1].value = "plenty"
    w.buttons[1].click()
    assert "answer=" in w.feedback[1].value and quiz.answered == 3
    assert w.submit(4, 6).correct and w.score_label.value == "Score: 3 / 9"
    w.inputs[8].value = "64 KiB"
    w.buttons[8].click()  # runs the engine and reveals
    assert "all-gather" in w.feedback[8].value and "Correct" in w.feedback[8].value
    assert w.score_text == "Score: 4 / 9"
    assert "application/vnd.jupyter.widget-view+json" in w._repr_mimebundle_()


def test_widget_shows_a_failed_run():
    def broken(world_size, nbytes):
        raise RuntimeError("rank 1 died")

    w = show_quiz(ring_quiz(runner=broken))
    w.inputs[8].value = "64 KiB"
    w.buttons[8].click()
    assert "The run failed" in w.feedback[8].value and "rank 1 died" in w.feedback[8].value
    with pytest.raises(ValueError, match="quiz="):
        show_quiz("ring")


@pytest.mark.multiprocess
def test_a_closed_cluster_gets_one_line_on_how_to_start_one_again():
    from edu_parallel import Cluster
    from edu_parallel.comm import cluster_runner

    quiz = tour_quiz()
    (i,) = [i for i, q in enumerate(quiz) if isinstance(q, PredictThenRun)]
    cluster = Cluster(quiz[i].params["N"], timeout=20)  # the size the quiz's run takes
    cluster.close()  # as a lesson's last cell once did, before its quiz was answered
    w = show_quiz(tour_quiz(runner=cluster_runner(cluster)))
    w.inputs[i].value = "4"
    w.buttons[i].click()
    shown = w.feedback[i].value
    assert "cluster is closed. Run the cell that starts it" in shown and "Traceback" not in shown
    assert w.quiz.answered == 0  # nothing was graded against a run that did not happen


def test_importing_the_package_loads_neither_ipywidgets_nor_torch_distributed():
    code = "import edu_parallel.quiz as q; q.BANKS['03_ring_allreduce']().answer(8, '64 KiB')"
    fresh_python(code, absent=("ipywidgets", "torch.distributed"))


# ------------------------------------------------------------------ terminal
def test_terminal_interactive_with_fake_input():
    quiz = ring_quiz()
    e1 = "abcd"[quiz[2].position(1)]  # the outline's double count, as this learner sees it
    facts = ",".join("abcd"[quiz[7].position(k)] for k in (0, 1, 3))
    answers = iter(["768 KiB", "not a number", "1.5 MiB", e1, "", "6", "3 MiB", "2", facts])
    answers = iter([*answers, "64 KiB"])
    out: list[str] = []
    score = run_in_terminal(quiz, lambda _p: next(answers), out.append, interactive=True)
    text = "\n".join(out)
    assert score == quiz.score == 7  # b) for E1 is wrong, busbw skipped
    assert "answer='not a number'" in text and "(skipped) Answer: 150 GB/s" in text
    assert "running the engine" in text and "all-gather" in text
    assert text.rstrip().endswith("Score: 7 / 9 (8 answered)")


def test_terminal_stops_at_end_of_input_and_prints_without_a_tty():
    def eof(_prompt):
        raise EOFError

    out: list[str] = []
    assert run_in_terminal(tour_quiz(), eof, out.append, interactive=True) == 0
    assert "end of input" in "\n".join(out)
    out.clear()
    run_in_terminal(tour_quiz(), eof, out.append, interactive=False)
    text = "\n".join(out)
    assert "Answer: 4 events" in text and "Why:" in text and "send ->r1" in text
