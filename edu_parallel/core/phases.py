"""What a learner reads for a phase: a plan step's ``phase`` as a report, grid or figure names it.

The phases themselves stay English identifiers wherever they are data (a plan's text, a trace's
events, JSON); :func:`phase_label` is their display name, translated where it is shown. The one
home of these names: ``comm/`` (the text reports) and ``viz/`` (the figures) both import it, and
neither can import the other.
"""

from __future__ import annotations

from .i18n import N_, _

# phase identifier (plans/) -> its display name, a gettext message
PHASE_NAMES = {
    "reduce-scatter": N_("reduce-scatter"),
    "all-gather": N_("all-gather"),
    "all-reduce": N_("all-reduce"),
    "all-to-all": N_("all-to-all"),
    "reduce": N_("reduce"),
    "broadcast": N_("broadcast"),
    "gather": N_("gather"),
    "scatter": N_("scatter"),
    "push": N_("push"),  # a parameter server's workers send their gradients
    "pull": N_("pull"),  # ... and fetch the sum back
}


def phase_label(phase: str | None) -> str:
    """A plan phase or collective as the learner reads it (``"reduce-scatter"``, translated);
    a phase without a display name is shown as written."""
    if phase is None:
        return ""
    return _(PHASE_NAMES[phase]) if phase in PHASE_NAMES else phase
