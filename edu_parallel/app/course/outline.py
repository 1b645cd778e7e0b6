"""The course outline, carried in the package: its 19 units and the ten corrections to it.

The outline (in Chinese, titled 分布式训练与通信, "distributed training and communication") is the
scope of the course, not its truth. Each unit is quoted here by its own objective lines (the
``•`` lines), word for word, with an English topic; each erratum (``errata.py``) quotes the
outline's claim word for word (``outline_zh``, with an English rendering for the English pages),
says what is right, and what the course runs to show it. Which lessons teach a unit or show an
erratum is computed in :mod:`.lessons` from the lessons' own data, never typed twice. The English
texts are marked ``N_()`` and shown through ``_()``, so the Chinese pages read them from the
gettext catalog; ``tests/test_course_i18n.py`` checks each quote against the outline's text where
it is present (``../shared/syllabus/`` beside the repository) and that it is Chinese everywhere.

References for the corrections: nccl-tests ``doc/PERFORMANCE.md``; Narayanan et al. 2021
(arXiv 2104.04473); Huang et al. 2019, GPipe (arXiv 1811.06965); Shoeybi et al. 2019, Megatron-LM
(arXiv 1909.08053); NCCL ``src/graph/trees.cc``, ``tuning.cc``; Thakur, Rabenseifner and Gropp
2005; ROCm documentation and ROCm/rccl; Rajbhandari et al. 2019, ZeRO (arXiv 1910.02054);
PyTorch ``torch/csrc/distributed/c10d/reducer.hpp``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.i18n import N_

OUTLINE_TITLE = "分布式训练与通信"


@dataclass(frozen=True)
class Unit:
    """One unit of the outline: its objective lines quoted, and its topic (English, marked for
    translation: shown as ``_(unit.topic)``)."""

    id: str
    objectives_zh: tuple[str, ...]
    topic: str


@dataclass(frozen=True)
class Erratum:
    """Where the outline is wrong: its words, the gist, what is right, and what the course runs.

    ``outline_zh`` is the outline's claim in its own words, each item a verbatim substring of the
    outline's text; ``outline_en`` renders each item in English, for the English pages only (the
    Chinese pages show the quote alone). The other texts are English marked ``N_()``, shown
    through ``_()``.
    """

    id: str
    units: tuple[str, ...]
    outline_zh: tuple[str, ...]  # the outline's own words, quoted exactly
    outline_en: tuple[str, ...]  # the same words in English, one item per quote
    says: str
    right: str
    shown: str  # what the course measures or runs instead ("" when text only)
    source: str


def _unit(n: int, objectives: tuple[str, str, str], topic: str) -> Unit:
    return Unit(f"U{n}", objectives, topic)


UNITS: tuple[Unit, ...] = (
    _unit(
        1,
        ("理解各并行策略的原理", "掌握各策略的通信与显存特征", "理解组合使用与取舍"),
        N_(
            "Parallel strategies DP / TP / PP / EP: principles; communication and memory traits; "
            "combining them and the trade-offs"
        ),
    ),
    _unit(
        2,
        ("理解 ZeRO 各阶段切分内容", "理解 FSDP 的分片机制", "理解显存优化与通信的权衡"),
        N_("ZeRO stages: what each shards; the FSDP sharding mechanism; memory vs communication"),
    ),
    _unit(
        3,
        ("理解 Ring-AllReduce 的两个阶段", "推导通信量公式", "对比 Tree/PS 方案"),
        N_(
            "Ring-AllReduce: the two phases; derive the communication volume; compare with tree "
            "and parameter server"
        ),
    ),
    _unit(
        4,
        ("理解流水线并行 bubble 的成因", "掌握 bubble 占比公式推导", "理解 1F1B 调度节省显存"),
        N_("Pipeline bubble: cause; derive the bubble fraction; how 1F1B saves memory"),
    ),
    _unit(
        5,
        ("理解各集合原语的语义", "掌握 Ring/Tree 算法选择", "理解跨节点带宽优化"),
        N_(
            "NCCL collectives: semantics of each primitive; choosing ring or tree; cross-node "
            "bandwidth optimisation"
        ),
    ),
    _unit(
        6,
        ("理解 3D 并行的组合关系", "掌握各维度承担的角色", "理解 pipeline bubble 优化"),
        N_(
            "3D parallelism: how DP, TP and PP combine; the role of each dimension; reducing the "
            "pipeline bubble"
        ),
    ),
    _unit(
        7,
        ("理解各并行策略的显存分摊方式", "掌握各策略的通信量特征", "理解适用场景"),
        N_("Memory sharing and communication volume of each strategy; when to use which"),
    ),
    _unit(
        8,
        ("理解 NCCL 拓扑选择", "掌握 NVLink/IB 带宽利用", "理解通信计算重叠配置"),
        N_(
            "NCCL topology choice; using NVLink and InfiniBand bandwidth; configuring "
            "compute/communication overlap"
        ),
    ),
    _unit(
        9,
        ("理解 Ring 实现的两个阶段", "理解 Tree 实现的层次归约", "对比两者适用场景"),
        N_(
            "AllReduce implementations: ring's two phases; tree's hierarchical reduction; when "
            "each fits"
        ),
    ),
    _unit(
        10,
        ("理解 Ring 算法的两阶段", "推导通信量公式", "理解带宽利用率"),
        N_("Ring volume formula; bandwidth utilisation (algbw vs busbw)"),
    ),
    _unit(
        11,
        ("理解梯度分桶的机制", "掌握通信与反向重叠的原理", "理解桶大小对带宽利用率的影响"),
        N_(
            "Gradient bucketing: the mechanism; overlap with backward; how bucket size affects "
            "bandwidth use"
        ),
    ),
    _unit(
        12,
        (
            "理解列并行与行并行的通信需求",
            "掌握 AllReduce/AllGather 的选择逻辑",
            "理解 MoE 的 all-to-all 通信",
        ),
        N_(
            "TP column vs row parallel: what each must communicate; AllReduce vs AllGather; MoE "
            "all-to-all"
        ),
    ),
    _unit(
        13,
        ("理解各框架的核心并行能力", "掌握各自的实现特色", "理解适用场景"),
        N_("Megatron-LM vs DeepSpeed vs ColossalAI: core capabilities, hallmarks, where each fits"),
    ),
    _unit(
        14,
        ("理解 ZeRO 各阶段适用场景", "掌握 ZeRO 与 TP/PP 的组合", "理解组合原则"),
        N_("When to use which ZeRO stage; combining ZeRO with TP/PP; principles"),
    ),
    _unit(
        15,
        ("理解各方法的显存优化来源", "掌握 ZeRO 的分片思路", "理解与模型并行的互补"),
        N_("ZeRO vs model parallelism: where the memory saving comes from; how they complement"),
    ),
    _unit(
        16,
        ("理解梯度压缩的原理", "理解异步训练的机制", "理解两者的权衡"),
        N_("Gradient compression; asynchronous training; their trade-offs"),
    ),
    _unit(
        17,
        ("理解同步/异步模式的机制", "掌握收敛与通信的权衡", "理解适用场景"),
        N_(
            "Synchronous vs asynchronous gradient sync: convergence vs communication; when to use "
            "each"
        ),
    ),
    _unit(
        18,
        ("理解 pipeline 并行中的通信重叠", "理解梯度通信与计算重叠", "掌握重叠的收益"),
        N_(
            "Overlapping communication with computation, in pipelines and in gradient sync; what "
            "it gains"
        ),
    ),
    _unit(
        19,
        ("理解各通信库的归属", "掌握各互联技术的差异", "理解跨厂商生态"),
        N_(
            "Communication libraries (NCCL, RCCL) and interconnects (NVLink, Infinity Fabric, "
            "RoCE/InfiniBand); cross-vendor"
        ),
    ),
)
