"""The quiz in JupyterLab: one input, a Submit button and a feedback area per question.

:class:`QuizWidget` keeps the state in its :class:`~edu_parallel.quiz.container.Quiz` and only
renders it, so everything works without a browser: ``w.submit(i, value)``, or set ``w.inputs[i]``
and call ``w.buttons[i].click()``. ipywidgets is imported lazily, when a widget is built.
"""

from __future__ import annotations

import html
from typing import Any

from ..core.errors import bad_value, check_int
from .container import Quiz, question_text
from .core import Feedback, MultipleChoice, PredictThenRun


class QuizWidget:
    """Renders ``quiz``: ``inputs[i]``, ``buttons[i]``, ``feedback[i]`` (HTML) and ``score_label``.

    ``inputs[i]`` is a RadioButtons (one answer, value = choice index), a VBox of Checkboxes
    (several answers) or a Text (numbers). For a predict-then-run question Submit runs the engine.
    """

    def __init__(self, quiz: Quiz):
        import ipywidgets as widgets

        if not isinstance(quiz, Quiz):
            raise bad_value("quiz", quiz, "a Quiz (see edu_parallel.quiz.BANKS)")
        self.quiz = quiz
        self.inputs: list[Any] = []
        self.buttons: list[Any] = []
        self.feedback: list[Any] = []
        boxes = []
        for i, q in enumerate(quiz.questions):
            inner = q.predict if isinstance(q, PredictThenRun) else q
            prompt, *rest = question_text(q, i + 1)
            hints = [line.strip() for line in rest if line.strip().startswith("(")]
            if isinstance(inner, MultipleChoice):
                labels = [inner.label(k) for k in range(len(inner.choices))]
                if inner.multiple:
                    box = widgets.VBox(
                        [widgets.Checkbox(value=False, description=t, indent=False) for t in labels]
                    )
                else:
                    box = widgets.RadioButtons(
                        options=[(t, k) for k, t in enumerate(labels)], index=None
                    )
                    box.layout.width = "auto"
            else:
                box = widgets.Text(placeholder="1536 or 1.5 KiB" if inner.is_bytes else "a number")
            label = "Predict, then run" if isinstance(q, PredictThenRun) else "Submit"
            button = widgets.Button(description=label, button_style="primary")
            button.on_click(lambda _b, i=i: self._on_click(i))
            out = widgets.HTML(value="")
            head = "<br>".join([f"<b>{html.escape(prompt)}</b>", *map(html.escape, hints)])
            self.inputs.append(box)
            self.buttons.append(button)
            self.feedback.append(out)
            boxes.append(widgets.VBox([widgets.HTML(value=head), box, button, out]))
        self.score_label = widgets.HTML(value=self.score_text)
        title = widgets.HTML(value=f"<h3>{html.escape(quiz.title)}</h3>")
        self.widget = widgets.VBox([title, *boxes, self.score_label])

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
                    raise bad_value("answer", picked, "at least one ticked choice")
                return picked
            if box.value is None:
                raise bad_value("answer", None, "one chosen answer")
            return box.value
        if not box.value.strip():
            raise bad_value("answer", box.value, "a number")
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
        except Exception as exc:  # a failed run: show it where the learner looks
            text = f"The run failed: {type(exc).__name__}: {exc}"
            self.feedback[index].value = f"<pre style='color:#b00'>{html.escape(text)}</pre>"

    def _index(self, index: int) -> int:
        return check_int("index", index, 0, len(self.quiz) - 1)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def render_feedback(fb: Feedback) -> str:
    """Feedback as HTML: verdict line, what the run showed, explanation."""
    colour = "#1a7f37" if fb.correct else "#b00"
    mark = "&#10004;" if fb.correct else "&#10008;"
    parts = [f"<div style='color:{colour}'>{mark} {html.escape(fb.message)}</div>"]
    if fb.reveal:
        parts.append(f"<pre>{html.escape(fb.reveal)}</pre>")
    parts.append(f"<div><i>Why:</i> {html.escape(fb.explanation)}</div>")
    return "\n".join(parts)


def show_quiz(quiz: Quiz) -> QuizWidget:
    """Build the widget for ``quiz``; the last expression of a cell displays it."""
    return QuizWidget(quiz)
