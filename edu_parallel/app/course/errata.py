"""Where the outline is wrong: its ten errata, each quoting the outline's claim word for word
(``outline_zh``), saying what is right and what the course runs to show it (:class:`Erratum` in
``outline.py``). The English texts are marked ``N_()`` and shown through ``_()``.

References: nccl-tests ``doc/PERFORMANCE.md``; Narayanan et al. 2021 (arXiv 2104.04473); Huang et
al. 2019, GPipe (arXiv 1811.06965); Shoeybi et al. 2019, Megatron-LM (arXiv 1909.08053); NCCL
``src/graph/trees.cc``, ``tuning.cc``; Thakur, Rabenseifner and Gropp 2005; ROCm documentation and
ROCm/rccl; Rajbhandari et al. 2019, ZeRO (arXiv 1910.02054); PyTorch
``torch/csrc/distributed/c10d/reducer.hpp``.
"""

from __future__ import annotations

from ...core.i18n import N_
from .outline import Erratum

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
            "The landscape table of lesson 15: every library with its maker, hardware and the "
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
