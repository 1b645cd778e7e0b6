"""The quiz in JupyterLab: one input, a Submit button and a feedback area per question.

:class:`QuizWidget` keeps the state in its :class:`~edu_parallel.quiz.container.Quiz` and only
renders it, so everything works without a browser: ``w.submit(i, value)``, or set ``w.inputs[i]``
and call ``w.buttons[i].click()``. ipywidgets is imported lazily, when a widget is built.
``QuizWidget(quiz, keys=[...])`` shows only those questions (a prediction asked in the lesson's
body, before its run).

ipywidgets 8 draws radio and checkbox labels on one line, cut with an ellipsis; the widget marks
its choices with CSS classes and ships a ``<style>`` (in an HTML widget) that lets them wrap, so a
long option is read in full and never overprints the next one.
"""

from __future__ import annotations

import html
from typing import Any

from ..core.errors import ClusterClosedError, bad_value, check_int
from ..core.i18n import _
from .container import Quiz, question_text
from .predict import PredictThenRun
from .questions import Feedback, MultipleChoice

CHOICES_CLASS = "edu-quiz-choices"  # a RadioButtons whose labels wrap
CHECK_CLASS = "edu-quiz-check"  # a Checkbox whose label wraps
QUESTION_CLASS = "edu-quiz-question"  # one question: prompt, answer input, button, feedback
INTRO_CLASS = "edu-quiz-intro"  # the line naming the predict-then-run questions (predict_line)
STYLE = f"""<style>
.jupyter-widgets.{CHOICES_CLASS} {{ width: 100% !important; height: auto !important; }}
.{CHOICES_CLASS} .widget-radio-box {{ width: 100%; flex-grow: 1; }}
.{CHOICES_CLASS} .widget-radio-box label {{
  display: flex !important; align-items: flex-start; gap: 0.5em; height: auto !important;
  line-height: 1.4 !important; white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; margin: 0.15em 0; }}
.{CHOICES_CLASS} .widget-radio-box input {{ order: -1; flex: none; margin: 0.2em 0 0 0; }}
.jupyter-widgets.{CHECK_CLASS} {{ width: 100% !important; height: auto !important;
  line-height: 1.4 !important; }}
.{CHECK_CLASS} label, .{CHECK_CLASS} label span {{
  display: flex; align-items: flex-start; gap: 0.5em; height: auto !important;
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }}
.{CHECK_CLASS} input {{ order: -1; flex: none; margin-top: 0.2em; }}
</style>"""


class QuizWidget:
    """Renders ``quiz``: ``inputs[i]``, ``buttons[i]``, ``feedback[i]`` (HTML) and ``score_label``.

    ``inputs[i]`` is a RadioButtons (one answer, value = choice index), a VBox of Checkboxes
    (several answers) or a Text (numbers). For a predict-then-run question Submit runs the engine.
    """

    def __init__(self, quiz: Quiz, keys: list[str] | None = None):
        import ipywidgets as widgets

        if not isinstance(quiz, Quiz):
            raise bad_value("quiz", quiz, "a Quiz (see edu_parallel.quiz.BANKS)")
        if keys is not None:
            quiz = quiz.subset(keys)
        self.quiz = quiz
        self.inputs: list[Any] = []
        self.buttons: list[Any] = []
        self.feedback: list[Any] = []
        boxes = []
        for i, q in enumerate(quiz.questions):
            inner = q.predict if isinstance(q, PredictThenRun) else q
            prompt, *rest = question_text(q, i + 1, typed=False)
            hints = [line.strip() for line in rest if line.strip().startswith(("(", "（"))]
            if isinstance(inner, MultipleChoice):
                labels = [inner.label(k) for k in range(len(inner.choices))]
                if inner.multiple:
                    box = widgets.VBox([_checkbox(widgets, t) for t in labels])
                    box.layout.width = "100%"
                else:
                    box = widgets.RadioButtons(
                        options=[(t, k) for k, t in enumerate(labels)], index=None
                    )
                    box.layout.width = "100%"
                    box.add_class(CHOICES_CLASS)
            else:
                hint = _("1536 or 1.5 KiB") if inner.is_bytes else _("a number")
                box = widgets.Text(placeholder=hint)
            label = _("Predict, then run") if isinstance(q, PredictThenRun) else _("Submit")
            button = widgets.Button(description=label, button_style="primary")
            button.on_click(lambda _b, i=i: self._on_click(i))
            out = widgets.HTML(value="")
            head = "<br>".join([f"<b>{html.escape(prompt)}</b>", *map(html.escape, hints)])
            head = f"<div style='line-height:1.45;margin-top:0.6em'>{head}</div>"
            self.inputs.append(box)
            self.buttons.append(button)
            self.feedback.append(out)
            question = widgets.VBox([widgets.HTML(value=head), box, button, out])
            question.add_class(QUESTION_CLASS)
            boxes.append(question)
        self.score_label = widgets.HTML(value=self.score_text)
        intro = predict_line(quiz)
        intro = f"<p class='{INTRO_CLASS}'>{html.escape(intro)}</p>" if intro else ""
        title = widgets.HTML(value=STYLE + f"<h3>{html.escape(quiz.title)}</h3>" + intro)
        self.widget = widgets.VBox([title, *boxes, self.score_label])
        self.widget.layout.width = "100%"

    @property
    def score_text(self) -> str:
        """``"Score: k / n"``."""
        return self.quiz.score_line()

    def read_input(self, index: int) -> Any:
        """The answer currently entered for question ``index`` (ValueError when there is none)."""
        q = self.quiz[index]
        inner = q.predict if isinstance(q, PredictThenRun) else q
        box = self.inputs[index]
        if isinstance(inner, MultipleChoice):
            if inner.multiple:
                picked = {k for k, cb in enumerate(box.children) if cb.value}
                if not picked:
                    raise bad_value("answer", picked, _("at least one ticked choice"))
                return picked
            if box.value is None:
                raise bad_value("answer", None, _("one chosen answer"))
            return box.value
        if not box.value.strip():
            raise bad_value("answer", box.value, _("a number"))
        return box.value

    def submit(self, index: int, value: Any = None) -> Feedback | None:
        """Grade ``value`` (default: what the input holds), show the feedback, update the score.

        An answer that cannot be read shows why and returns None, recording nothing.
        """
        i = self._index(index)
        try:
            fb = self.quiz.answer(i, self.read_input(i) if value is None else value)
        except ValueError as exc:
            self.feedback[i].value = f"<span style='color:#b35900'>{html.escape(str(exc))}</span>"
            return None
        self.feedback[i].value = render_feedback(fb)
        self.score_label.value = self.score_text
        return fb

    def _on_click(self, index: int) -> None:
        try:
            self.submit(index)
        except ClusterClosedError:  # e.g. after cluster.close(): say how to get one back
            text = _(
                "This lesson's cluster is closed. Run the cell that starts it (cluster = "
                "Cluster(...)), then this quiz cell again, and press the button."
            )
        except Exception as exc:  # a failed run: show it where the learner looks
            text = _("The run failed: {kind}: {error}").format(kind=type(exc).__name__, error=exc)
        else:
            return
        self.feedback[index].value = f"<pre style='color:#b00'>{html.escape(text)}</pre>"

    def _index(self, index: int) -> int:
        return check_int("index", index, 0, len(self.quiz) - 1)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def predict_line(quiz: Quiz) -> str:
    """The sentence that names the quiz's predict-then-run questions by their numbers as shown,
    generated from the questions (so it cannot go stale); ``""`` when there are none, or when
    every question is one (the lesson's prose above it says what to predict)."""
    numbers = [i + 1 for i, q in enumerate(quiz.questions) if isinstance(q, PredictThenRun)]
    if not numbers or len(numbers) == len(quiz.questions):
        return ""
    if len(numbers) == 1:
        return _("Question {number} asks you to predict, then run on this cluster.").format(
            number=numbers[0]
        )
    listed = _(", ").join(map(str, numbers[:-1]))
    return _("Questions {numbers} and {last} ask you to predict, then run on this cluster.").format(
        numbers=listed, last=numbers[-1]
    )


def _checkbox(widgets: Any, text: str) -> Any:
    """A Checkbox whose label wraps (see :data:`STYLE`), with the full text as its tooltip."""
    box = widgets.Checkbox(value=False, description=text, indent=False, tooltip=text)
    box.layout.width = "100%"
    box.add_class(CHECK_CLASS)
    return box


def render_feedback(fb: Feedback) -> str:
    """Feedback as HTML: verdict line, what the run showed, explanation."""
    colour = "#1a7f37" if fb.correct else "#b00"
    mark = "&#10004;" if fb.correct else "&#10008;"
    parts = [f"<div style='color:{colour}'>{mark} {html.escape(fb.message)}</div>"]
    if fb.reveal:
        parts.append(f"<pre>{html.escape(fb.reveal)}</pre>")
    why = html.escape(_("Why:"))
    parts.append(f"<div><i>{why}</i> {html.escape(fb.explanation)}</div>")
    return "\n".join(parts)


def show_quiz(quiz: Quiz, keys: list[str] | None = None) -> QuizWidget:
    """Build the widget for ``quiz`` (or only the questions ``keys``); a cell's last expression
    displays it."""
    return QuizWidget(quiz, keys)
