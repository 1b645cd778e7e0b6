"""The learner's language: English or 简体中文, through gettext.

Every learner-facing string of the package is written in English inside ``_()`` and looked up, when
it is shown, in the ``zh_CN`` catalog (``core/locale/zh_CN/LC_MESSAGES/edu_parallel.mo``, compiled
from the ``.po`` files under ``locale/zh_CN/package/`` by ``python -m edu_parallel.app.i18n_catalog
--compile``). Numbers and units are the same in both languages: they are formatted outside the
message and passed in as placeholders, ``_("{n} ranks sent {size}").format(n=4, size="1 MiB")``.

Which language:

1. :func:`set_language` (``edu_parallel.set_language("zh")``), for this process and the ranks it
   forks afterwards;
2. else ``EDU_PARALLEL_LANG`` (``zh`` or ``en``), which ``edu-parallel lab --lang zh`` sets for the
   kernels and which the command line reads;
3. else the locale (``LANGUAGE``, ``LC_ALL``, ``LC_MESSAGES``, ``LANG``: ``zh_CN.UTF-8`` means zh);
4. else English, which is also the fallback for any message without a translation.

Rules for the code (``tests/test_i18n.py`` enforces them):

* ``_()`` is called when a string is shown, never at import time: a module-level constant is
  marked ``N_("...")`` (extracted, not translated) and passed through ``_()`` where it is used;
* a message's placeholders are named (``{size}``), and the translation keeps every one of them.

References: the Python ``gettext`` module; Babel's ``pybabel extract`` keywords ``_`` and ``N_``.
"""

from __future__ import annotations

import gettext
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DOMAIN = "edu_parallel"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANG_VAR = "EDU_PARALLEL_LANG"
LANGUAGES = {"en": "English", "zh": "简体中文"}
_GETTEXT_NAME = {"en": "en", "zh": "zh_CN"}  # the catalog folder of each language
_ALIASES = {"zh_cn": "zh", "zh-cn": "zh", "zh_hans": "zh", "zh-hans": "zh", "cn": "zh"}

_chosen: str | None = None  # set_language's choice; None: the environment decides
_catalogs: dict[str, gettext.NullTranslations] = {}


def normalize_language(value: object, option: str = "language") -> str:
    """``"zh"``, ``"zh_CN"``, ``"zh-Hans"`` -> ``"zh"``; ``"en"``, ``"en_US"`` -> ``"en"``.

    Anything else raises a one-line ValueError naming ``option`` and the valid values.
    """
    text = str(value).strip().lower() if isinstance(value, str) else ""
    text = _ALIASES.get(text, text)
    base = text.split(".")[0].replace("-", "_").split("_")[0]
    if base in LANGUAGES:
        return base
    # errors.py translates through this module, so the one-line error is built here
    raise ValueError(
        _("{name}={value!r} is not valid: expected {valid}").format(
            name=option, value=value, valid=_("one of 'en', 'zh' (also zh_CN, zh-Hans, en_US)")
        )
    )


def _from_locale() -> str:
    """The language the locale asks for (``zh`` for any ``zh*``), else English."""
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var, "")
        if not value:
            continue
        first = value.split(":")[0].split(".")[0].lower()
        return "zh" if first.startswith("zh") else "en"
    return "en"


def get_language() -> str:
    """The language messages are shown in now: ``"en"`` or ``"zh"``.

    A value of ``EDU_PARALLEL_LANG`` that names no language raises a one-line ValueError.
    """
    if _chosen is not None:
        return _chosen
    env = os.environ.get(LANG_VAR, "").strip()
    if env:
        return normalize_language(env, LANG_VAR)
    return _from_locale()


def _current() -> str:
    """:func:`get_language`, but English where ``EDU_PARALLEL_LANG`` is unreadable (so that the
    error naming it can itself be shown). Never raises."""
    if _chosen is not None:
        return _chosen
    env = os.environ.get(LANG_VAR, "").strip().lower()
    if env:
        env = _ALIASES.get(env, env).split(".")[0].replace("-", "_").split("_")[0]
        return env if env in LANGUAGES else "en"
    return _from_locale()


def set_language(language: str | None) -> str:
    """Show the package's messages in ``language`` (``"zh"`` or ``"en"``); ``None`` lets the
    environment decide again. Returns the language now in force."""
    global _chosen
    _chosen = None if language is None else normalize_language(language)
    return get_language()


@contextmanager
def language(lang: str) -> Iterator[str]:
    """``with language("zh"): ...`` shows messages in ``lang`` inside the block only."""
    global _chosen
    before = _chosen
    _chosen = normalize_language(lang)
    try:
        yield _chosen
    finally:
        _chosen = before


def catalog(lang: str | None = None) -> gettext.NullTranslations:
    """The gettext catalog of ``lang`` (default: the current language); English is the identity."""
    lang = get_language() if lang is None else normalize_language(lang)
    if lang not in _catalogs:
        _catalogs[lang] = gettext.translation(
            DOMAIN, LOCALE_DIR, languages=[_GETTEXT_NAME[lang]], fallback=True
        )
    return _catalogs[lang]


def reload_catalogs() -> None:
    """Forget the loaded catalogs (after ``--compile`` wrote a new ``.mo``)."""
    _catalogs.clear()


def _(message: str) -> str:
    """``message`` in the current language (itself where the catalog has no translation; "" stays
    "", where gettext would give the catalog's header)."""
    lang = _current()
    if lang == "en" or not message:
        return message
    return catalog(lang).gettext(message)


def N_(message: str) -> str:  # noqa: N802 (gettext's conventional name)
    """Mark ``message`` for extraction without translating it (for module-level constants)."""
    return message
