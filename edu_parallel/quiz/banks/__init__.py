"""One quiz bank per lesson, one function per question; every answer is computed by package
code. A question that runs something calls the runner it is given; without one it uses a
formula that a test checks against the engine. Banks register in ``quiz/registry.py``."""

from __future__ import annotations

__all__: list[str] = []
