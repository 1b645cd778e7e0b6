"""Prose against the screen: what a lesson's sentences say its widgets show.

Two claims a sentence can make and a widget can contradict:

* a count of "predict, then run" questions ("The last two questions ask you to predict, then
  run"; "最后两道题要求先预测，再运行"): it must equal the number of predict-then-run
  questions of the quiz widget that follows it (:func:`announced_predicts`,
  :func:`predict_count_problems`);
* a button named in the prose ("press Play", "按 **▶ 播放**"): the name must be a label the
  widgets show in the lesson's language (:func:`button_mentions`, :func:`button_name_problems`).

The functions read plain text, so ``tests/test_prose_agrees.py`` checks the notebooks and banks
without a browser, and :func:`page_problems` checks what Chromium shows (``test_learner_path.py``),
reading the page with :data:`SEGMENTS_JS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
ZH_WORDS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6}
_COUNT = "|".join([*WORDS, r"\d+"])
# "the last two questions ... predict", "the last question runs the engine: predict"
_EN_LAST = re.compile(
    rf"\b(?:last|first|next|final|following)\s+(?:({_COUNT})\s+)?(questions?)\b[^.]*?\bpredict",
    re.IGNORECASE,
)
# "Questions 3 and 4 ask you to predict", "Question 2 asks you to predict"
_EN_NUMBERED = re.compile(
    r"\bquestions?\s+(\d+(?:\s*,\s*\d+)*(?:\s+and\s+\d+)?)\s+asks?\b[^.]*?\bpredict", re.I
)
# "two of these questions ask you to predict"
_EN_OF = re.compile(rf"\b({_COUNT})\s+(?:of\s+(?:these|the)\s+)?questions?\s+asks?\b[^.]*?predict")
_ZH_LAST = re.compile(r"(?:最后|前|接下来|下面)的?\s*([一两二三四五六]|\d+)?\s*道题[^。]*?预测")
_ZH_NUMBERED = re.compile(r"第\s*(\d+(?:\s*[、,，和]\s*\d+)*)\s*题[^。]*?预测")


def _number(word: str | None) -> int:
    if word is None:
        return 1
    word = word.lower()
    return int(word) if word.isdigit() else WORDS.get(word, ZH_WORDS.get(word, 0))


def announced_predicts(text: str) -> list[int]:
    """Every count of predict-then-run questions that ``text`` announces (English or Chinese);
    a sentence two patterns match counts once."""
    found: list[tuple[int, int, int]] = []  # (start, end, count)

    def add(m: re.Match, count: int) -> None:
        if not any(m.start() < end and start < m.end() for start, end, _ in found):
            found.append((m.start(), m.end(), count))

    for m in _EN_LAST.finditer(text):
        add(m, _number(m.group(1)) if m.group(2).lower().endswith("s") else 1)
    for pattern in (_EN_NUMBERED, _ZH_NUMBERED):
        for m in pattern.finditer(text):
            add(m, len(re.findall(r"\d+", m.group(1))))
    for pattern in (_EN_OF, _ZH_LAST):
        for m in pattern.finditer(text):
            add(m, _number(m.group(1)))
    return [count for _, _, count in sorted(found)]


@dataclass(frozen=True)
class Segment:
    """A quiz widget and what comes before it: the prose since the previous quiz widget (or the
    lesson's start), the widget's own text outside its questions, and what it shows."""

    where: str
    prose: str
    intro: str
    questions: int
    predicts: int


def predict_count_problems(segments: Iterable[Segment]) -> list[str]:
    """Each announced count of predict-then-run questions that its widget does not show."""
    problems = []
    for s in segments:
        for count in announced_predicts(s.prose + "\n" + s.intro):
            if count != s.predicts:
                problems.append(
                    f"{s.where}: the prose announces {count} predict-then-run question(s); the"
                    f" quiz below it shows {s.predicts} of {s.questions}"
                )
    return problems


# A button named in prose: after "press"/"click"/按/点击, or set in bold/italics, with the words
# of every label a widget of the course shows (English and Chinese, without its symbols).
_VERBS = r"(?:press|pressing|click|clicking|hit|按下?|点击|单击)"


def label_words(label: str) -> str:
    """A label as prose names it: its letters, without the ▶/❚❚ symbols, lower-cased."""
    return re.sub(r"[^\w ,，]+", " ", label).strip().lower()


def button_mentions(text: str, names: Iterable[str]) -> list[str]:
    """The buttons ``text`` names, of the label words ``names`` (any language), as written."""
    found = []
    for name in sorted({label_words(n) for n in names if label_words(n)}, key=len, reverse=True):
        word = re.escape(name).replace(r"\ ", r"\s+")
        edge = r"\b" if name.isascii() else ""
        symbols = r"[\s*_`▶◀❚]*"
        pattern = rf"{_VERBS}\s*(?:the\s+)?{symbols}({edge}{word}{edge})|\*+{symbols}({word})\*+"
        for m in re.finditer(pattern, text, re.IGNORECASE):
            found.append((m.group(1) or m.group(2)).lower())
    return found


def button_name_problems(where: str, text: str, names: Iterable[str], shown: Iterable[str]):
    """The buttons ``text`` names (of the course's label words ``names``) that no label of
    ``shown`` (what this lesson's widgets read, in its language) carries."""
    shown_words = [label_words(s) for s in shown]
    return [
        f"{where}: the prose names the button {name!r}; the buttons read {sorted(set(shown))}"
        for name in button_mentions(text, names)
        if not any(
            name == s or re.search(rf"(?<!\w){re.escape(name)}(?!\w)", s) for s in shown_words
        )
    ]


# every label a button of the course's widgets carries (msgids: viz/controls.py, viz/player.py,
# viz/pipeline_widget.py, quiz/widget.py, exercises/feedback.py)
BUTTONS = (
    "▶ play",
    "❚❚ pause",
    "play",
    "Run",
    "Run again",
    "\u25c0 back",
    "next \u25b6",
    "Submit",
    "Predict, then run",
    "Show the solution",
)


def button_labels(lang: str) -> list[str]:
    """The course's button labels as a learner reads them in ``lang``."""
    from edu_parallel.core.i18n import _, language

    with language(lang):
        return [_(b) for b in BUTTONS]


def all_label_words() -> list[str]:
    """The names prose may give a button, in either language."""
    return button_labels("en") + button_labels("zh")


# Reads the visible notebook in the order a learner reads it: one entry per quiz widget (its
# questions, its predict-then-run buttons, its text outside the questions, the prose above it),
# the prose after the last one (bold and italics kept as **...**), and every label the outputs'
# buttons carry (ipywidgets buttons and Play labels, plotly's play/pause buttons).
SEGMENTS_JS = """(predictLabel) => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)') || document;
  const out = {segments: [], buttons: [], tail: ''};
  const text = (md) => {
    const copy = md.cloneNode(true);
    for (const e of copy.querySelectorAll('strong, em, b, i')) {
      e.textContent = '**' + e.textContent + '**';
    }
    return copy.textContent;
  };
  let prose = [];
  for (const cell of panel.querySelectorAll('.jp-Cell')) {
    for (const md of cell.querySelectorAll('.jp-RenderedMarkdown')) prose.push(text(md));
    for (const area of cell.querySelectorAll('.jp-OutputArea-output')) {
      const questions = area.querySelectorAll('.edu-quiz-question');
      if (!questions.length) continue;
      const buttons = [...area.querySelectorAll('.edu-quiz-question button')];
      const intro = [...area.querySelectorAll('.edu-quiz-intro')].map(e => e.textContent);
      out.segments.push({
        prose: prose.join('\\n'), intro: intro.join('\\n'), questions: questions.length,
        predicts: buttons.filter(b => b.textContent.trim() === predictLabel).length,
      });
      prose = [];
    }
  }
  out.tail = prose.join('\\n');
  const labels = panel.querySelectorAll(
    '.jp-OutputArea button, .jp-OutputArea .updatemenu-button text, ' +
    '.jp-OutputArea .widget-play .widget-label, .jp-OutputArea .widget-toggle-buttons button');
  for (const b of labels) {
    const t = (b.textContent || '').trim();
    if (t) out.buttons.push(t);
  }
  return out;
}"""


def page_problems(page, where: str, lang: str) -> list[str]:
    """What the visible notebook's prose says and its widgets contradict: each announced count
    of predict-then-run questions against the quiz widget below it, and each button the prose
    names against the labels its outputs show (``lang``: the lesson's language)."""
    from edu_parallel.core.i18n import _, language

    with language(lang):
        predict_label = _("Predict, then run")
    read = page.evaluate(SEGMENTS_JS, predict_label)
    segments = [
        Segment(f"{where} quiz {i + 1}", s["prose"], s["intro"], s["questions"], s["predicts"])
        for i, s in enumerate(read["segments"])
    ]
    prose = "\n".join([*(s.prose for s in segments), read["tail"]])
    problems = predict_count_problems(segments)
    problems += announced_after_last_quiz(where, read["tail"])
    return problems + button_name_problems(where, prose, all_label_words(), read["buttons"])


def announced_after_last_quiz(where: str, tail: str) -> list[str]:
    """A count announced after the last quiz widget announces questions that never come."""
    return [
        f"{where}: the prose announces {count} predict-then-run question(s) and no quiz follows"
        for count in announced_predicts(tail)
    ]
