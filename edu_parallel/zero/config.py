"""One validated description of a ZeRO run and of an FSDP2 run: :class:`ZeroConfig`,
:class:`FsdpConfig`.

Built once where a run starts (:func:`~edu_parallel.zero.report.run_zero`,
:func:`~edu_parallel.zero.fsdp_report.run_fsdp`, the command line) and passed down unchanged to
every rank's job and to the one-process reference; the constructor checks every field and raises
one ValueError that names each bad one (torchtitan's ``ParallelismConfig`` style: one frozen
object, a docstring under each field). Nothing below checks the same values again.

Both train the tiny MLP of :mod:`edu_parallel.task.mlp` (layer widths ``dims``, ``microbatch``
rows per rank per step) with mixed-precision Adam (Rajbhandari et al. 2019, "ZeRO", arXiv
1910.02054, §3.1). The stages are ZeRO §5's (:data:`~edu_parallel.memory.model_states.ZERO_STAGES`);
the FSDP2 options are ``fully_shard``'s (the PyTorch ``torch.distributed.fsdp.fully_shard`` docs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_choice,
    check_int,
    check_positive,
    check_seed,
)
from ..core.i18n import _
from ..memory.model_states import ZERO_STAGES
from ..task.mlp import DEFAULT_DIMS, DEFAULT_MICROBATCH, check_dims, num_params

MAX_STEPS = 1000  # training steps of one run (ZeRO and FSDP)
MAX_MICROBATCH = 4096  # rows per rank per step

# FSDP2 units: one per nn.Linear (plus the root, then empty), or only the root (the whole model)
Granularity = Literal["layer", "model"]
GRANULARITIES: tuple[Granularity, ...] = get_args(Granularity)


def check_stage(name: str, value: Any) -> int:
    """``value`` as a ZeRO stage (0 = plain DP), or the one-line error."""
    if isinstance(value, bool) or value not in ZERO_STAGES:
        raise bad_value(name, value, _("one of 0 (DP), 1, 2, 3"))
    return int(value)


def check_layer_widths(name: str, value: Any) -> tuple[int, ...]:
    """``value`` as the MLP's layer widths (:func:`~edu_parallel.task.mlp.check_dims`)."""
    return check_dims(value)


@dataclass(frozen=True)
class ZeroConfig(Checked):
    """One ZeRO run: stage, optimizer steps, the model and its data; see the module doc."""

    world_size: int
    """Ranks N that shard the flat buffers; at most Psi, so that every rank owns an element."""
    stage: int = 1
    """0 (plain DP), 1 (optimizer states sharded), 2 (+ gradients), 3 (+ parameters)."""
    steps: int = 2
    """Optimizer steps, 1 to :data:`MAX_STEPS`."""
    lr: float = 1e-2
    """Adam's learning rate, > 0."""
    seed: int = 0
    """Seed of the weights and of every rank's batch, >= 0."""
    dims: tuple[int, ...] = DEFAULT_DIMS
    """Layer widths ``(d_in, h1, ..., d_out)`` of the MLP: at least 2, each in [1, 4096]."""
    microbatch: int = DEFAULT_MICROBATCH
    """Rows of the batch each rank sees per step, 1 to :data:`MAX_MICROBATCH`."""

    def _check(self) -> list[str]:
        p = Problems()
        n = self._field(p, "world_size", check_int, 1)
        self._field(p, "stage", check_stage)
        self._field(p, "steps", check_int, 1, MAX_STEPS)
        self._field(p, "lr", check_positive)
        self._field(p, "seed", check_seed)
        dims = self._field(p, "dims", check_layer_widths)
        self._field(p, "microbatch", check_int, 1, MAX_MICROBATCH)
        if n is not None and dims is not None and n > num_params(dims):
            valid = _("at most {psi} (the number of parameters to shard, dims={dims})")
            p.add(bad_value("world_size", n, valid.format(psi=num_params(dims), dims=dims)))
        return p.lines

    @property
    def psi(self) -> int:
        """Parameters of the MLP (weights and biases)."""
        return num_params(self.dims)


@dataclass(frozen=True)
class FsdpConfig(Checked):
    """One FSDP2 run beside ZeRO-3 on the same ranks, model, data and optimizer."""

    world_size: int
    """Ranks N of the 1-D device mesh (and of the ZeRO-3 run it is compared with)."""
    steps: int = 2
    """Optimizer steps, 1 to :data:`MAX_STEPS`."""
    lr: float = 1e-2
    """Adam's learning rate, > 0."""
    seed: int = 0
    """Seed of the weights and of every rank's batch, >= 0."""
    granularity: Granularity = "layer"
    """``"layer"``: one ``fully_shard`` unit per ``nn.Linear``; ``"model"``: the root only."""
    reshard_after_forward: bool | None = True
    """Passed to every ``fully_shard`` call; None: torch's default (True except for the root)."""
    forward_prefetch: bool = False
    """Unit k's forward also all-gathers unit k+1 (layer granularity only)."""
    dims: tuple[int, ...] = DEFAULT_DIMS
    """Layer widths of the MLP, as :attr:`ZeroConfig.dims`."""
    microbatch: int = DEFAULT_MICROBATCH
    """Rows per rank per step, as :attr:`ZeroConfig.microbatch`."""
    zero3: ZeroConfig = field(init=False, repr=False, compare=False)
    """The ZeRO-3 run on the same ranks, model, data and optimizer (built by the check)."""

    def _check(self) -> list[str]:
        p = Problems()
        shared = ("world_size", "steps", "lr", "seed", "dims", "microbatch")
        try:  # the fields ZeRO-3 shares are checked once, by its config
            zero3 = ZeroConfig(stage=3, **{k: getattr(self, k) for k in shared})
        except ValueError as exc:
            p.add(exc)
        else:
            object.__setattr__(self, "zero3", zero3)
            for k in shared:  # the normalised values (a list of widths becomes a tuple)
                object.__setattr__(self, k, getattr(zero3, k))
        granularity = self._field(p, "granularity", check_choice, GRANULARITIES)
        raf = self.reshard_after_forward
        if raf is not None and not isinstance(raf, bool):
            valid = _("True, False or None (torch's default: True except for the root unit)")
            p.add(bad_value("reshard_after_forward", raf, valid))
        prefetch = self.forward_prefetch
        if not isinstance(prefetch, bool) or (prefetch and granularity == "model"):
            valid = _(
                "True or False; True only with granularity='layer' (one unit has nothing to"
                " prefetch)"
            )
            p.add(bad_value("forward_prefetch", prefetch, valid))
        return p.lines

    @property
    def gathers_per_step(self) -> int:
        """All-gathers of every unit per step: 2 (before forward and again before backward) when
        the units are resharded after forward, 1 when they are kept (the root is kept under
        torch's default, so one unit of the whole model is gathered once)."""
        kept = self.reshard_after_forward is False or (
            self.granularity == "model" and self.reshard_after_forward is None
        )
        return 1 if kept else 2
