"""Parent side of :mod:`edu_parallel.strategy_map`: run the strategies, check them, read the table off the traces.

Every number of the table is read from a strategy's trace (:func:`measure`):

* parameter bytes: the sum of the rank's "params" memory events (one per tensor it holds);
* activation bytes: the peak of the rank's "activations" memory events replayed in order (bytes
  autograd saved for backward; for PP the microbatches alive at once under the schedule);
* bytes sent per step: ``send`` events count their bytes; a collective event records the size of
  its first buffer, converted to the bytes ONE rank SENDS with the ring algorithm
  (:func:`edu_parallel.zero_report.ring_sent_bytes`: all-reduce ``2(N-1)/N S``, reduce-scatter and
  all-gather ``(N-1)/N S``); an ``all_to_all_single`` counts the bytes sent to OTHER ranks, read
  from the split mark :func:`edu_parallel.moe.exchange` writes (the own block is a local copy);
* messages: point-to-point sends plus collective calls (a ring all-reduce is 2(N-1) transfers
  underneath; one call is counted once);
* collectives: the op names of the collective events (and ``isend`` for point-to-point).

Correctness: every rank's output rows (TP+SP: its sequence block) and gradient slices equal (``allclose``) the single-process
reference of :func:`edu_parallel.strategy_map_model.reference_step`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import bad_value, check_choice, check_int, check_positive
from .strategy_map_model import HOLDS, PP_SCHEDULES, STRATEGIES, STRATEGY_NAMES, SYNC, MapConfig
from .trace import Trace

RTOL, ATOL = 1e-4, 1e-5  # float32, other summation orders
A2A = "all_to_all_single"
SPLITS_MARK = "all_to_all_splits"  # written by edu_parallel.moe.exchange after every all-to-all
PASSES = ("forward", "backward", SYNC)
MAX_LAYERS, MAX_HIDDEN, MAX_BATCH = 64, 256, 1024


def check_map_args(world_size: int, strategies: Any = STRATEGIES, **sizes: Any) -> tuple[tuple[str, ...], MapConfig]:  # fmt: skip
    """Validate before any process starts; a ValueError names the parameter, value and valid range."""
    if isinstance(strategies, str) or not strategies:
        raise bad_value("strategies", strategies, "a non-empty list of " + ", ".join(STRATEGIES))
    chosen = tuple(check_choice("strategies", s, STRATEGIES) for s in strategies)
    if len(set(chosen)) != len(chosen):
        raise bad_value("strategies", strategies, "each strategy at most once")
    cfg = MapConfig(**sizes)
    n = world_size
    layers = check_int("layers", cfg.layers, 1, MAX_LAYERS)
    if "pp" in chosen and layers < n:
        raise bad_value("layers", layers, f"an integer in [{n}, {MAX_LAYERS}]: PP puts at least one block on each of the {n} ranks")  # fmt: skip
    hidden = check_int("hidden", cfg.hidden, 1, MAX_HIDDEN)
    if {"tp", "tp-sp"} & set(chosen) and cfg.ffn % n:
        raise bad_value("hidden", hidden, f"an integer with 4*hidden divisible by the TP degree {n} (W1 is split into {n} column blocks)")  # fmt: skip
    batch = check_int("batch", cfg.batch, 1, MAX_BATCH)
    if {"dp", "ep"} & set(chosen) and batch % n:
        raise bad_value("batch", batch, f"a multiple of world_size={n} (DP and EP give each rank batch/N rows)")  # fmt: skip
    seq = check_int("seq", cfg.seq, 1, MAX_BATCH)
    if "tp-sp" in chosen and seq % n:
        raise bad_value("seq", seq, f"a multiple of world_size={n} in [{n}, {MAX_BATCH}] (TP+SP gives each rank seq/N positions)")  # fmt: skip
    if "pp" in chosen:
        m = check_int("microbatches", cfg.num_microbatches(n), 1, batch)
        if batch % m:
            raise bad_value("microbatches", cfg.microbatches, f"a divisor of batch={batch} (default 2N = {2 * n})")  # fmt: skip
        check_choice("schedule", cfg.schedule, PP_SCHEDULES)
    if "ep" in chosen:
        from .moe_run import check_moe_args

        check_moe_args(n, cfg.experts, cfg.top_k, cfg.capacity_factor, 0.0,
                       batch // n * cfg.seq, hidden, cfg.seed)  # fmt: skip
        if cfg.ffn % cfg.experts:
            raise bad_value("experts", cfg.experts, f"a divisor of 4*hidden={cfg.ffn} (each expert is 4h/E wide)")  # fmt: skip
    check_positive("lr", cfg.lr)
    check_int("seed", cfg.seed, 0)
    return chosen, cfg


# ---------------------------------------------------------------- reading a trace
def collective_sent_bytes(op: str, recorded_nbytes: int, world_size: int) -> float:
    """Bytes one rank sends in the ring version of ``op`` (all_reduce, reduce_scatter_*, all_gather_*)."""
    from .zero_report import ring_sent_bytes

    return ring_sent_bytes(op, recorded_nbytes, world_size)


def pass_of(phase: str | None) -> str:
    """``"grad_sync"``, ``"backward"`` or ``"forward"`` (every other phase: MoE's exchanges)."""
    return phase if phase in (SYNC, "backward") else "forward"


def measure(trace: Trace, world_size: int) -> list[dict[str, Any]]:
    """Per rank: params, peak activations, sent bytes (total and by pass), messages, ops, holds."""
    rows = []
    for r in range(world_size):
        ev = [e for e in trace.events if e.rank == r]
        params = sum(e.nbytes for e in ev if e.kind == "memory" and (e.attrs or {}).get("category") == "params")  # fmt: skip
        level = peak = 0
        for e in ev:
            if e.kind == "memory" and (e.attrs or {}).get("category") == "activations":
                level += e.nbytes
                peak = max(peak, level)
        by_pass = dict.fromkeys(PASSES, 0.0)
        ops: Counter[str] = Counter()
        a2a_calls = 0
        for e in ev:
            if e.kind == "send":
                by_pass[pass_of(e.phase)] += e.nbytes
                ops[e.op] += 1
            elif e.kind == "collective":
                ops[e.op] += 1
                if e.op == A2A:
                    a2a_calls += 1
                else:
                    by_pass[pass_of(e.phase)] += collective_sent_bytes(e.op, e.nbytes, world_size)
            elif e.kind == "mark" and e.op == SPLITS_MARK:
                a = e.attrs or {}
                by_pass[pass_of(a.get("phase"))] += sum(a["send_bytes"]) - a["send_bytes"][r]
                a2a_calls -= 1
        if a2a_calls:
            raise ValueError(f"rank {r}: {A2A} calls and split marks do not pair up ({a2a_calls:+d})")  # fmt: skip
        holds = {}
        for e in ev:
            if e.kind == "mark" and e.op == HOLDS:
                a = e.attrs or {}
                frac = 1.0
                for (lo, hi), full in zip(a["index"], a["shape"], strict=True):
                    frac *= (hi - lo) / full if full else 1.0
                holds[a["tensor"]] = {"index": a["index"], "shape": a["shape"], "fraction": frac,
                                      "nbytes": a["nbytes"]}  # fmt: skip
        rows.append({"param_bytes": params, "activation_bytes": peak,
                     "sent_bytes": sum(by_pass.values()), "sent_by_pass": by_pass,
                     "messages": sum(ops.values()), "ops": dict(sorted(ops.items())),
                     "holds": holds})  # fmt: skip
    return rows


# ---------------------------------------------------------------- the report
@dataclass
class StrategyRun:
    """One strategy's step on N ranks: checked against one process, measured from its trace."""

    strategy: str
    name: str
    model: str  # "dense" or "moe" (EP trains the MoE variant)
    matches_reference: bool
    max_abs_diff: float
    model_param_bytes: int  # one full copy of the model it trains
    per_rank: list[dict[str, Any]]  # rows of measure()
    trace: Trace = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # e.g. EP routing per rank

    def column(self, key: str) -> list[Any]:
        return [row[key] for row in self.per_rank]

    def to_json_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("trace", "extra")}


@dataclass
class StrategyMapReport:
    """The measured table of :func:`run_strategy_map`: ``runs[strategy]`` and the 1-process baseline."""

    world_size: int
    config: dict[str, Any]
    microbatches: int
    runs: dict[str, StrategyRun]
    reference_activation_bytes: int  # the dense model, whole batch, one process
    dense_param_bytes: int
    moe_param_bytes: int

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return all(run.matches_reference for run in self.runs.values())

    @property
    def trace(self) -> Trace:
        """All runs in one trace; each event's phase is prefixed with its strategy (``"tp/forward"``)."""
        events = [replace(e, phase=f"{s}/{e.phase or '-'}") for s, run in self.runs.items() for e in run.trace.events]  # fmt: skip
        return Trace({"concept": "map", "world_size": self.world_size, "strategies": list(self.runs)}, events)  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per (strategy, rank), the table as data."""
        return [{"strategy": run.name, "rank": r, **{k: v for k, v in row.items() if k != "holds"}}
                for run in self.runs.values() for r, row in enumerate(run.per_rank)]  # fmt: skip

    def to_json_dict(self) -> dict[str, Any]:
        return {"concept": "map", "world_size": self.world_size, "config": self.config,
                "microbatches": self.microbatches, "matches_reference": self.matches_builtin,
                "reference_activation_bytes": self.reference_activation_bytes,
                "dense_param_bytes": self.dense_param_bytes, "moe_param_bytes": self.moe_param_bytes,
                "runs": {s: run.to_json_dict() for s, run in self.runs.items()}, "rows": self.rows()}  # fmt: skip

    def format(self) -> str:
        return format_strategy_map(self)


def _compare(results: list[dict[str, Any]], ref: dict[str, Any]) -> tuple[bool, float]:
    import torch

    ok, worst = True, 0.0
    for res in results:
        pairs = []
        if res["out"] is not None:
            (lo, hi), (s_lo, s_hi) = res["rows"], res.get("seq", (0, ref["out"].shape[1]))
            pairs.append((res["out"], ref["out"][lo:hi, s_lo:s_hi]))  # (rows, positions, h)
        for name, (index, g) in res["grads"].items():
            pairs.append((g, ref["grads"][name][tuple(slice(a, b) for a, b in index)]))
        for got, want in pairs:
            same = got.shape == want.shape and torch.allclose(got, want, rtol=RTOL, atol=ATOL)
            ok &= bool(same)
            worst = max(worst, float((got - want).abs().max()) if got.shape == want.shape else float("inf"))  # fmt: skip
    return ok, worst


def run_strategy_map(cluster: Any, strategies: Any = STRATEGIES, **sizes: Any) -> StrategyMapReport | None:  # fmt: skip
    """One training step of each strategy on ``cluster``; ``sizes``: fields of :class:`MapConfig`."""
    from .strategy_map import strategy_job
    from .strategy_map_model import model_param_bytes, reference_step

    n = cluster.world_size
    chosen, cfg = check_map_args(n, strategies, **sizes)
    refs: dict[str, dict[str, Any]] = {}
    runs = {}
    for s in chosen:
        out = cluster.run(strategy_job, s, cfg)
        if out is None:  # a non-zero rank under torchrun: take part in every run, report nothing
            continue
        variant = "moe" if s == "ep" else "dense"
        if variant not in refs:
            refs[variant] = reference_step(cfg, variant, n)
        ok, worst = _compare(out.results, refs[variant])
        out.trace.meta.update({"concept": "map", "strategy": s, "world_size": n})
        extra = {"routings": [res["routings"] for res in out.results]} if s == "ep" else {}
        runs[s] = StrategyRun(s, STRATEGY_NAMES[s], variant, ok, worst,
                              model_param_bytes(cfg, variant), measure(out.trace, n), out.trace, extra)  # fmt: skip
    if not runs:
        return None
    dense_ref = refs.get("dense") or reference_step(cfg, "dense", n)
    return StrategyMapReport(n, dict(cfg.__dict__), cfg.num_microbatches(n), runs,
                             dense_ref["activation_bytes"], model_param_bytes(cfg, "dense"),
                             model_param_bytes(cfg, "moe"))  # fmt: skip


def ops_text(ops: dict[str, int]) -> str:
    """``{"all_reduce": 8}`` -> ``"all_reduce x8"``; point-to-point ``isend`` shown as ``send``."""
    return ", ".join(f"{'send' if op == 'isend' else op} x{k}" for op, k in ops.items()) or "-"


def format_strategy_map(report: StrategyMapReport) -> str:
    """The table: one line per (strategy, rank), then the whole-model sizes it is measured against."""
    c = report.config
    head = (f"Strategy map on {report.world_size} ranks: {c['layers']} residual MLP blocks h={c['hidden']} "
            f"(FFN {4 * c['hidden']}), batch {c['batch']} x {c['seq']} tokens, one SGD step; "
            f"EP: {c['experts']} experts of width {4 * c['hidden'] // c['experts']}, top-{c['top_k']}")  # fmt: skip
    cols = f"{'strategy':<9}{'rank':>5}{'params B':>11}{'activ. B':>11}{'sent B/step':>13}{'msgs':>6}  collectives"  # fmt: skip
    lines = [head, "", cols, f"{'1 proc':<9}{'-':>5}{report.dense_param_bytes:>11,}{report.reference_activation_bytes:>11,}{0:>13,}{0:>6}  -"]  # fmt: skip
    for run in report.runs.values():
        mark = "" if run.matches_reference else "  (DOES NOT MATCH ONE PROCESS)"
        for r, row in enumerate(run.per_rank):
            lines.append(f"{run.name if r == 0 else '':<9}{r:>5}{row['param_bytes']:>11,}{row['activation_bytes']:>11,}"
                         f"{row['sent_bytes']:>13,.0f}{row['messages']:>6}  {ops_text(row['ops'])}{mark if r == 0 else ''}")  # fmt: skip
    checked = ", ".join(f"{run.name} {'yes' if run.matches_reference else 'NO'} ({run.max_abs_diff:.1e})" for run in report.runs.values())  # fmt: skip
    lines += ["", f"outputs and gradients equal one process (max |diff|): {checked}",
              f"whole model: dense {report.dense_param_bytes:,} B, MoE variant {report.moe_param_bytes:,} B "
              "(same FFN parameters, plus routers); sent bytes = ring volume for all-reduce, "
              "bytes to other ranks for all-to-all and sends"]  # fmt: skip
    return "\n".join(lines)


def map_runner(cluster: Any, **sizes: Any) -> Any:
    """``run(world_size) -> StrategyMapReport`` for predict-then-run quizzes: ``cluster`` when the
    world size matches, else a short-lived Cluster of that size."""

    def run(world_size: int) -> StrategyMapReport | None:
        if world_size == cluster.world_size:
            return run_strategy_map(cluster, **sizes)
        from .cluster import Cluster

        with Cluster(world_size, cluster.backend, timeout=cluster.timeout) as other:
            return run_strategy_map(other, **sizes)

    return run
