"""``edu-parallel model``: the alpha-beta prediction of one collective, no processes started.

    edu-parallel model allreduce --algo ring --world-size 64 --size 1GiB --link nvlink4-h100
    edu-parallel model allreduce --algo hierarchical --world-size 16 --nodes 2 --link nvlink4 --json
    edu-parallel model allreduce --world-size 64 --nodes 8 --nics 8 --size 1GiB
    edu-parallel model all_gather --world-size 8 --size 64MiB --link ib-ndr-400

Prints the predicted time, algbw and busbw (nccl-tests' definitions) and the latency (``α``) and
bandwidth (``S/B``) terms of :func:`edu_parallel.models.cost.predict`. With ``--nodes K`` the ranks
form ``K`` nodes joined by ``--inter-link``, ``--nics N`` NICs per node (default 1): the ring runs
one channel per NIC (NCCL's channels), other flat algorithms run at the slower link's pace.
Formulas: Thakur, Rabenseifner & Gropp 2005 and NCCL ``src/graph/tuning.cc`` (see ``costmodel``).
"""

from __future__ import annotations

import argparse
import json

from ..core.errors import (
    Problems,
    bad_value,
    check_choice,
    check_int,
    check_non_negative,
    check_positive,
    conflicts,
    needs,
    spelling,
)
from ..core.i18n import _
from ..core.units import parse_size
from ..models.cost import (
    ALLREDUCE_ALGOS,
    OTHER_COLLECTIVES,
    Prediction,
    link_preset,
    predict,
)
from ..models.nccl.constants import ALGOS as NCCL_ALGOS
from ..models.nccl.systems import nccl_system
from ..models.nccl.tuning import NcclSystem
from ..models.topology import LINKS, Link, Topology
from .model_text import format_prediction
from .nccl_command import (
    DEFAULT_ARCH,
    DEFAULT_COLLECTIVE,
    NCCL_ONLY,
    add_nccl_arguments,
    run_nccl,
)

ALLREDUCE = ("allreduce", "all_reduce")
WHAT = (*ALLREDUCE, *OTHER_COLLECTIVES, "nccl")  # nccl: NCCL's own tuner
# what --world-size, --link and --inter-link mean when not given (None: not given, see
# checked_options: --system sets them, and one node has no link between nodes)
DEFAULT_WORLD_SIZE, DEFAULT_LINK, DEFAULT_INTER_LINK = 8, "nvlink4-h100", "ib-ndr-400"
ALPHA_BETA_ONLY = ("servers", "alpha", "bandwidth", "reduce_gbps", "nics")  # NCCL's tuner: none


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "what", metavar="COLLECTIVE", help=_("one of {what}").format(what=", ".join(WHAT))
    )
    p.add_argument(
        "--algo",
        default=None,
        help=_("all-reduce algorithm: {allreduce_algos} (default ring); nccl: NCCL_ALGO").format(
            allreduce_algos=", ".join(ALLREDUCE_ALGOS)
        ),
    )
    p.add_argument(
        "--world-size",
        type=int,
        default=None,
        help=_("ranks (default {n}; nccl: --system sets it)").format(n=DEFAULT_WORLD_SIZE),
    )
    p.add_argument(
        "--size", default="1MiB", help=_("bytes per rank: 4096, 64KiB, 1GiB (default 1MiB)")
    )
    p.add_argument(
        "--link",
        default=None,
        help=_("preset: {links}, or an alias such as nvlink4 (default {default})").format(
            links=", ".join(LINKS), default=DEFAULT_LINK
        ),
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=None,
        help=_("split the ranks into K nodes (intra: --link, inter: --inter-link)"),
    )
    p.add_argument(
        "--inter-link",
        default=None,
        help=_("link between nodes with --nodes (default {default})").format(
            default=DEFAULT_INTER_LINK
        ),
    )
    p.add_argument(
        "--nics",
        type=int,
        default=None,
        help=_("NICs per node with --nodes, a divisor of the ranks per node (default 1)"),
    )
    p.add_argument(
        "--servers", type=int, default=None, help=_("parameter servers (--algo ps only)")
    )
    p.add_argument(
        "--alpha", type=float, default=None, help=_("override the link's latency, seconds")
    )
    p.add_argument(
        "--bandwidth",
        type=float,
        default=None,
        help=_("override the link's bandwidth, GB/s (1e9 B/s)"),
    )
    p.add_argument(
        "--reduce-gbps", type=float, default=None, help=_("reduction speed in GB/s (default: free)")
    )
    add_nccl_arguments(p)
    p.add_argument("--json", action="store_true", help=_("print one JSON object"))


def checked_options(a: argparse.Namespace) -> argparse.Namespace:
    """The options checked once, before any prediction: every one that means nothing for this
    COLLECTIVE (``--algo`` of all_to_all, ``--system`` of allreduce, ``--alpha`` of nccl), or
    that ``--system`` contradicts, is refused in one line naming both; the options come back
    with their defaults resolved."""
    if a.what not in WHAT:
        raise bad_value("COLLECTIVE", a.what, _("one of {options}").format(options=", ".join(WHAT)))
    p = Problems()
    nccl = a.what == "nccl"
    if a.algo is not None and not nccl and a.what not in ALLREDUCE:
        why = _(
            "{what} is modelled by its one algorithm; --algo picks the all-reduce algorithm of"
            " allreduce ({allreduce_algos}) or NCCL_ALGO of nccl ({nccl_algos})"
        ).format(
            what=a.what,
            allreduce_algos=", ".join(ALLREDUCE_ALGOS),
            nccl_algos=", ".join(NCCL_ALGOS),
        )
        p.add(conflicts("algo", a.algo, "COLLECTIVE", a.what, why))
    others = (
        _(
            "NCCL's tuner has its own latencies and bandwidths; only the alpha-beta models"
            " (allreduce, all_gather, ...) read it"
        )
        if nccl
        else _("only model nccl reads it (NCCL's tuner)")
    )
    for name in ALPHA_BETA_ONLY if nccl else NCCL_ONLY:
        if getattr(a, name) is not None:
            p.add(conflicts(name, getattr(a, name), "COLLECTIVE", a.what, others))
    if nccl and a.system is not None:
        try:
            _check_preset(a, nccl_system(a.system), p)
        except ValueError as exc:  # no such preset
            p.add(exc)
    else:
        if a.inter_link is not None and a.nodes is None:
            why = _("ranks in one node cross no link between nodes")
            p.add(needs("inter_link", a.inter_link, "nodes", why))
        if a.nics is not None and a.nodes is None and not nccl:
            p.add(needs("nics", a.nics, "nodes", _("NICs join nodes")))
        if a.algo == "hierarchical" and a.what in ALLREDUCE and a.nodes is None:
            flat = ", ".join(x for x in ALLREDUCE_ALGOS if x != "hierarchical")
            valid = _(
                "one of {algos} without {nodes} (hierarchical runs rings inside the nodes and"
                " across them: give {nodes})"
            ).format(algos=flat, nodes=spelling("nodes"))
            p.add(bad_value("algo", a.algo, valid))
    if not nccl:  # the values as typed (GB/s, not the model's B/s), named as typed
        if a.algo is not None and a.what in ALLREDUCE:
            p.check(check_choice, "algo", a.algo, ALLREDUCE_ALGOS)
        for name, check in (
            ("alpha", check_non_negative),
            ("bandwidth", check_positive),
            ("reduce_gbps", check_positive),
        ):
            if getattr(a, name, None) is not None:
                p.check(check, name, getattr(a, name))
    p.raise_any()
    defaults = {
        "world_size": DEFAULT_WORLD_SIZE,
        "link": DEFAULT_LINK,
        "inter_link": DEFAULT_INTER_LINK,
        "collective": DEFAULT_COLLECTIVE,
        "arch": DEFAULT_ARCH,
    }
    given = {name: value for name, value in vars(a).items() if value is not None}
    return argparse.Namespace(**{**vars(a), **defaults, **given})


def _check_preset(a: argparse.Namespace, system: NcclSystem, p: Problems) -> None:
    """Record each option that contradicts what the ``--system`` preset sets (its ranks, nodes,
    links and GPUs); one that says the same is accepted."""
    topo = system.topology
    describe = system.describe().removeprefix(f"{system.name}: ")
    preset = {
        "world_size": topo.world_size,
        "nodes": topo.nodes,
        "link": topo.intra.name,
        "inter_link": topo.inter.name,
        "arch": system.arch,
    }
    for name, value in preset.items():
        given = getattr(a, name)
        if given is None:
            continue
        same = given
        if name in ("link", "inter_link"):
            try:
                same = link_preset(given, name).name
            except ValueError:
                same = None
        if same != value:
            valid = _("no value or {value!r}: {system}={name!r} sets it ({describe})").format(
                value=value, system=spelling("system"), name=a.system, describe=describe
            )
            p.add(bad_value(name, given, valid))


def model_prediction(a: argparse.Namespace) -> tuple[Prediction, Link | Topology]:
    """Predict from the options :func:`checked_options` returned; a bad value (a size, a world
    size) raises a one-line ValueError."""
    name = (a.algo or "ring") if a.what in ALLREDUCE else a.what
    nbytes = parse_size(a.size)
    link = link_preset(a.link, "link")
    if a.alpha is not None or a.bandwidth is not None:
        alpha = link.alpha_s if a.alpha is None else a.alpha
        bw = link.bandwidth_Bps if a.bandwidth is None else a.bandwidth * 1e9
        source = _("{name} with --alpha/--bandwidth").format(name=link.name)
        link = Link(f"{link.name} (custom)", alpha, bw, source)
    where: Link | Topology = link
    nics = a.nics
    if a.nodes is not None:
        where = Topology.split(a.world_size, a.nodes, link, link_preset(a.inter_link, "inter_link"))
        if nics is not None:
            g = where.gpus_per_node
            if check_int("nics", nics, 1, g) and g % nics:
                divisors = ", ".join(str(d) for d in range(1, g + 1) if g % d == 0)
                raise bad_value(
                    "nics",
                    nics,
                    _("a divisor of the {g} ranks per node ({divisors})").format(
                        g=g, divisors=divisors
                    ),
                )
            where = Topology(where.nodes, g, where.intra, where.inter, nics)
    reduce_Bps = None if a.reduce_gbps is None else a.reduce_gbps * 1e9
    return (
        predict(name, a.world_size, nbytes, where, reduce_Bps=reduce_Bps, servers=a.servers),
        where,
    )


def run_model(a: argparse.Namespace) -> int:
    a = checked_options(a)
    if a.what == "nccl":
        return run_nccl(a)
    p, where = model_prediction(a)
    if a.json:
        data = p.to_json_dict()
        data["collective"] = "all_reduce" if p.name in ALLREDUCE_ALGOS else p.name
        data["algo"] = p.name if p.name in ALLREDUCE_ALGOS else None
        print(json.dumps(data))
    else:
        print(format_prediction(p, where))
    return 0
