"""The text of ``edu-parallel model``: a prediction's summary, one labelled row per term.

The labels and the formula's words read in the learner's language, padded by display width
(:mod:`edu_parallel.core.width`); algbw and busbw keep nccl-tests' names in both languages.
"""

from __future__ import annotations

from ..core.i18n import _
from ..core.units import format_bytes
from ..core.width import fitted, ljust
from ..models.cost import FORMULA_MESSAGES, Prediction
from ..models.topology import Link, Topology


def _time(t: float) -> str:
    return f"{t * 1e6:.4g} µs" if t < 1e-3 else f"{t * 1e3:.4g} ms" if t < 1 else f"{t:.4g} s"


def shown_formula(formula: str) -> str:
    """``formula`` with its words in the learner's language (the JSON keeps the English)."""
    for message in FORMULA_MESSAGES:
        formula = formula.replace(message, _(message))
    return formula


def _label(text: str) -> str:
    """A row's label, padded to the values' column by display width."""
    return ljust(text, 10) + " "


@fitted
def format_prediction(p: Prediction, where: Link | Topology) -> str:
    links = [where.intra, where.inter] if isinstance(where, Topology) else [where]
    lines = [
        _("{name} on {n} ranks, {size} per rank, {link}").format(
            name=p.name, n=p.world_size, size=format_bytes(p.nbytes), link=p.link
        )
    ]
    for link in links:
        lines.append(
            "  "
            + _("link {name}: α = {alpha} µs, B = {bandwidth} GB/s").format(
                name=link.name,
                alpha=f"{link.alpha_s * 1e6:.3g}",
                bandwidth=f"{link.bandwidth_Bps / 1e9:.4g}",
            )
            + ("  " + _("({source})").format(source=_(link.source)) if link.source else "")
        )
    lines += [
        _label(_("formula")) + shown_formula(p.formula),
        _label(_("latency")) + f"{_time(p.latency_s)}   " + _("(α terms)"),
        _label(_("bandwidth")) + f"{_time(p.bandwidth_s)}   " + _("(S/B terms)"),
    ]
    if p.compute_s:
        lines.append(_label(_("reduce")) + f"{_time(p.compute_s)}   " + _("(γ terms)"))
    lines.append(_label(_("time")) + _time(p.time_s))
    if p.time_s == 0:  # one rank: nothing moves, so a bandwidth is undefined (not infinite)
        lines.append(
            _label("algbw")
            + "n/a   "
            + _("(one rank sends nothing: time 0, no bandwidth to measure)")
        )
        return "\n".join(lines)
    lines += [  # algbw and busbw: nccl-tests' names, in both languages
        _label("algbw") + f"{p.algbw_gbps:.4g} GB/s   " + _("(S / time)"),
        _label("busbw") + f"{p.busbw_gbps:.4g} GB/s   " + _("(algbw x nccl-tests bus factor)"),
    ]
    return "\n".join(lines)
