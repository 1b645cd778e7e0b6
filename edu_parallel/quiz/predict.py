"""The predict-then-run question: the learner predicts, then the engine runs and grades it.

The run is started lazily, on the first check, and cached, so a typo never starts it and two
widgets showing the same question share one run. Kinds of answer are in ``core.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import bad_value
from .numeric import Numeric
from .questions import Feedback, MultipleChoice, check_text


@dataclass
class PredictThenRun:
    """Predict with ``predict``, then ``run()`` the engine and show ``reveal(result)``.

    ``truth(result)`` gives the measured answer: a number for a :class:`Numeric` prediction, a
    choice index for a :class:`MultipleChoice` one (in the bank's order; the shown position is
    looked up). ``config`` is the run's configuration written as the lesson would write the call
    (``"zero_bytes(stage=2, world_size=3)"``): a test checks the lesson never printed it before.
    Without ``truth`` the prediction is graded against ``predict``'s own answer. The run happens
    on the first :meth:`check` (or :meth:`result`) and is cached. ``prompt`` and ``explanation``
    default to ``predict``'s.
    """

    kind: ClassVar[str] = "predict_then_run"
    prompt: str
    predict: Numeric | MultipleChoice
    run: Callable[[], Any]
    reveal: Callable[[Any], str]
    explanation: str = ""
    truth: Callable[[Any], float | int] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    config: str = ""
    _result: Any = field(default=None, init=False, repr=False, compare=False)
    _has_run: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.predict, (Numeric, MultipleChoice)):
            raise bad_value("predict", self.predict, "a Numeric or MultipleChoice question")
        self.prompt = self.prompt or self.predict.prompt
        self.explanation = self.explanation or self.predict.explanation
        check_text("prompt", self.prompt)
        check_text("explanation", self.explanation)
        for name in ("run", "reveal"):
            if not callable(getattr(self, name)):
                raise bad_value(name, getattr(self, name), "a callable")
        if self.truth is not None and not callable(self.truth):
            raise bad_value("truth", self.truth, "a callable or None")

    @property
    def predict_kind(self) -> str:
        """``"numeric"`` or ``"choice"``: what kind of answer the prediction is."""
        return self.predict.kind

    @property
    def has_run(self) -> bool:
        return self._has_run

    @property
    def expected(self) -> str:
        """The predicted answer from the formula (the run may measure something else)."""
        return self.predict.expected

    def result(self) -> Any:
        """Run the engine once and cache what ``run()`` returned."""
        if not self._has_run:
            self._result = self.run()
            self._has_run = True
        return self._result

    def parse(self, answer: Any) -> Any:
        return self.predict.parse(answer)

    def check(self, answer: Any) -> Feedback:
        self.parse(answer)  # a typo must not start a run
        result = self.result()
        if self.truth is None:
            fb = self.predict.check(answer)
        elif isinstance(self.predict, Numeric):
            fb = self.predict.grade(self.predict.parse(answer), float(self.truth(result)))
        else:
            shown = self.predict.position(int(self.truth(result)))
            fb = dataclasses.replace(self.predict, correct=shown).check(answer)
        return dataclasses.replace(fb, explanation=self.explanation, reveal=self.reveal(result))


Question = MultipleChoice | Numeric | PredictThenRun
QUESTION_TYPES = (MultipleChoice, Numeric, PredictThenRun)
