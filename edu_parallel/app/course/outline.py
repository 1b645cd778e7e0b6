"""The course outline, carried in the package: its 19 units and the ten corrections to it.

The outline (in Chinese, titled 分布式训练与通信, "distributed training and communication") is the
scope of the course, not its truth. Each unit is quoted here by its own objective lines (the
``•`` lines), word for word, with an English topic; each erratum quotes the outline's claim word
for word (``outline_zh``, with an English rendering for the English pages), says what is right,
and what the course runs to show it. Which lessons teach a unit or show an erratum is computed in
:mod:`.course` from the lessons' own data, never typed twice. The English texts are marked
``N_()`` and shown through ``_()``, so the Chinese pages read them from the gettext catalog;
``tests/test_course_i18n.py`` checks each quote against the outline's text where it is present
(``../shared/syllabus/`` beside the repository) and that it is Chinese everywhere.

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

ERRATA: tuple[Erratum, ...] = (
    Erratum(
        "E1",
        ("U3", "U10"),
        (
            "每轮传输数据量 2*(数据总量/N)（每个节点发一份、收一份），"
            "此阶段总通信量约 2*(N-1)/N * 数据量",
        ),
        (
            "each round transfers 2*(total data/N) (each node sends one share and receives one); "
            "the total communication of this phase is about 2*(N-1)/N * data size",
        ),
        N_(
            "Each phase of the ring moves 2(N−1)/N·D per node, and both phases together also "
            "2(N−1)/N·D."
        ),
        N_(
            "In each phase every rank sends (N−1)/N·D and receives as much; both phases together "
            "every rank sends 2(N−1)/N·D. The outline counts sending and receiving together in one "
            "place and not in the other."
        ),
        N_(
            "The bytes every rank sent in each phase of a real 4-rank ring, counted from the "
            "trace, equal (N−1)/N·D per phase and 2(N−1)/N·D in all."
        ),
        N_("nccl-tests doc/PERFORMANCE.md (busbw factor 2(n−1)/n)"),
    ),
    Erratum(
        "E2",
        ("U4", "U6"),
        ("峰值的激活显存从 O(P) 个微批降到 O(1) 个", "用 1F1B 调度降低 bubble 与内存峰值"),
        (
            "peak activation memory drops from O(P) micro-batches to O(1)",
            "the 1F1B schedule lowers the bubble and the memory peak",
        ),
        N_(
            "1F1B cuts peak activation memory from O(P) microbatches to O(1), and lowers the "
            "bubble."
        ),
        N_(
            "GPipe stashes the activations of M microbatches per stage; 1F1B at most P−i on stage "
            "i (at most P). 1F1B does not shrink the bubble; interleaving v model chunks per rank "
            "divides it by v: (1/v)·(P−1)/M of the ideal time."
        ),
        N_(
            "GPipe, 1F1B, interleaved 1F1B and ZB-H1 run on real ranks; the live activations of "
            "every stage are counted (GPipe M, 1F1B at most P−i) and the idle time is measured: "
            "1F1B keeps GPipe's bubble, interleaving divides it by v."
        ),
        N_("Narayanan et al. 2021 (arXiv 2104.04473) §2.2; PipeDream-Flush"),
    ),
    Erratum(
        "E3",
        ("U4", "U6"),
        ("按 GPipe 论文的经典公式，bubble 占比 = (P-1)/(M+P-1)，M 为微批数",),
        (
            "by the classic formula of the GPipe paper, bubble fraction = (P-1)/(M+P-1), M being "
            "the number of micro-batches",
        ),
        N_("The bubble fraction is (P−1)/(M+P−1)."),
        N_(
            "Right, as a share of the total time with equal per-microbatch stage times; Megatron's "
            "(P−1)/M is the same bubble relative to the ideal time. Both are named so that papers "
            "can be reconciled."
        ),
        N_(
            "The idle share of the executed and retimed pipeline timelines equals (P−1)/(M+P−1) of "
            "the total time and (P−1)/M of the ideal time."
        ),
        N_("GPipe (arXiv 1811.06965) §2.3; Narayanan et al. 2021 §2.2.1"),
    ),
    Erratum(
        "E4",
        ("U12",),
        ('简言之：列并行做"求和"故 AllReduce，行并行做"拼接"故 AllGather。',),
        (
            'in short: column parallelism "sums", hence AllReduce; row parallelism '
            '"concatenates", hence AllGather',
        ),
        N_("Column-parallel needs an all-reduce (sum), row-parallel an all-gather (concatenate)."),
        N_(
            "Reversed. Column-parallel (W split along output columns, X replicated): each rank "
            "holds a slice of Y, concatenated by an all-gather only if the full Y is needed; its "
            "backward all-reduces dX. Row-parallel (W split along input rows, X split along its "
            "last dimension): each rank holds a partial sum of Y, all-reduced in forward. "
            "Megatron's MLP (column then row) needs one all-reduce forward (g) and one backward "
            "(f)."
        ),
        N_(
            "Both layers run on real ranks and are compared with a dense nn.Linear (Y, dX, dW, "
            "db); the trace records which collective each needed. With the outline's collectives "
            "neither layer matches the dense one."
        ),
        N_(
            "Shoeybi et al. 2019 (arXiv 1909.08053) Fig. 3; Megatron-LM tensor_parallel/layers.py, "
            "mappings.py"
        ),
    ),
    Erratum(
        "E5",
        ("U3", "U9"),
        (
            "树形（主从树）每个节点向父节点汇总，带宽瓶颈在根节点",
            "根节点承担较多通信，可能成为瓶颈",
        ),
        (
            "tree (master-worker tree): each node aggregates to its parent; the bandwidth "
            "bottleneck is the root",
            "the root carries more of the communication and may become a bottleneck",
        ),
        N_("In a tree all-reduce the root carries most of the traffic and is the bottleneck."),
        N_(
            "True of a single reduce-to-root tree. NCCL uses two complementary binary trees, each "
            "carrying half the data, so no rank is a bottleneck. A tree's real advantage is "
            "latency, O(log N) steps against the ring's O(N): it wins small messages on many "
            "nodes; the ring wins when bandwidth-bound."
        ),
        N_(
            "Per-rank bytes counted on real ranks for a flat tree, single and sharded parameter "
            "servers, a binary tree, NCCL's double binary tree and the ring: only the flat tree "
            "and the single server push (N−1)·D through one rank; the double binary tree stays "
            "near 2D."
        ),
        N_("NCCL src/graph/trees.cc, tuning.cc; Thakur, Rabenseifner and Gropp 2005"),
    ),
    Erratum(
        "E6",
        ("U19",),
        ("RCXL 是 AMD 新推出的多 GPU 通信库，旨在替代/增强 RCCL",),
        (
            "RCXL is AMD's newly released multi-GPU communication library, meant to "
            "replace/enhance RCCL",
        ),
        N_('"RCXL" is AMD\'s new multi-GPU communication library, replacing or extending RCCL.'),
        N_(
            "No such AMD library exists. AMD's stack is RCCL (NCCL-compatible API, ring and tree, "
            "with MSCCL and MSCCL++ integrated) and rocSHMEM; RCCLX is Meta's fork of RCCL, not "
            "AMD's. An MI300X has 7 Infinity Fabric (xGMI) links, a fully connected 8-GPU mesh."
        ),
        N_(
            "The landscape table of lesson 13: every library with its maker, hardware and the "
            'torch backend that reaches it (RCCL loads as torch\'s "nccl" backend on ROCm), and '
            "the Infinity Fabric presets of the cost model with one real trace retimed on them."
        ),
        N_("ROCm documentation (MI300 architecture); ROCm/rccl"),
    ),
    Erratum(
        "E7",
        ("U2", "U14"),
        ("ZeRO-1/2 显存节省较小、通信较省，适合中等规模",),
        ("ZeRO-1/2 save less memory and communicate less; suited to medium scale",),
        N_("ZeRO-1 and ZeRO-2 communicate less."),
        N_(
            "ZeRO-1 and ZeRO-2 move the same volume as plain data parallelism (2Ψ per rank: a "
            "reduce-scatter and an all-gather); only ZeRO-3 adds a parameter all-gather in "
            "backward, 3Ψ (1.5×)."
        ),
        N_(
            "The bytes every rank sends in a training step, counted from real runs of DP and "
            "ZeRO-1, -2 and -3: ZeRO-1/2 equal DP, ZeRO-3 sends 1.5×."
        ),
        N_("Rajbhandari et al. 2019 (arXiv 1910.02054) §7"),
    ),
    Erratum(
        "E8",
        ("U2",),
        ("ZeRO 与 FSDP 的显存节省随模型规模增大而显著",),
        ("the memory saving of ZeRO and FSDP becomes significant as the model grows",),
        N_("ZeRO's memory saving is described only qualitatively."),
        N_(
            "With mixed-precision Adam the model states take, per GPU: DP 16Ψ; ZeRO-1 4Ψ + 12Ψ/N; "
            "ZeRO-2 2Ψ + 14Ψ/N; ZeRO-3 16Ψ/N bytes (activations not included)."
        ),
        N_(
            "A per-rank memory ledger of a real sharded mixed-precision step on a tiny model gives "
            "those bytes exactly; the calculator scales them to real models."
        ),
        N_("Rajbhandari et al. 2019 §3.1, Figure 1"),
    ),
    Erratum(
        "E9",
        ("U5", "U8"),
        (
            "Ring 算法带宽均衡、适合大规模多节点；Tree 算法利用多级带宽、延迟可控，"
            "适合节点数成组或跨机场景",
        ),
        (
            "the ring algorithm balances bandwidth and suits large multi-node scale; the tree "
            "algorithm uses multi-level bandwidth with controllable latency and suits grouped "
            "nodes or cross-machine settings",
        ),
        N_("Tree is for cross-node, ring for large clusters."),
        N_(
            "NCCL chooses per message size and topology from a latency/bandwidth model: ring "
            "latency grows with the number of ranks, tree latency with the log of the number of "
            "nodes; large, bandwidth-bound messages favour the ring. NCCL also has NVLS and "
            "NVLSTree (NVSwitch SHARP), CollNet (InfiniBand SHARP) and PAT, each with the LL, "
            "LL128 and Simple protocols; NCCL_ALGO and NCCL_PROTO force a choice."
        ),
        N_(
            "The alpha-beta model, calibrated on this machine and with NVLink and InfiniBand "
            "presets, predicts ring and tree time against message size and finds the crossover; "
            "NCCL 2.30.7's own tuning model picks (algorithm, protocol) per size on five cluster "
            "presets, and its crossover plots show the winner change with size and topology."
        ),
        N_("NCCL src/graph/tuning.cc (2.30.7)"),
    ),
    Erratum(
        "E10",
        ("U11",),
        ("实践中常用默认分桶（如 pytorch 的 bucket_cap）",),
        ("in practice the default bucketing is commonly used (such as PyTorch's bucket_cap)",),
        N_('The "default bucket_cap" is named but not given.'),
        N_("PyTorch DDP: bucket_cap_mb=25 (MiB) and a first bucket of 1 MiB."),
        N_(
            "The buckets of PyTorch's own DDP, read off a run on the same ranks, equal ours: a "
            "25 MiB cap and a 1 MiB first bucket; a bucket-size sweep measures the overlap."
        ),
        N_("PyTorch torch/csrc/distributed/c10d/reducer.hpp"),
    ),
)
