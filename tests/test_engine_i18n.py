"""The engine's errors in Chinese: what lesson 00's failure demo and the tour's step 4 print.

Each error is raised by a real job on real ranks with the learner's language set to Chinese in
the parent (the job carries it to the ranks, so what a rank publishes as its step is Chinese too),
and its message must hold no English phrase of three or more words
(:func:`helpers.english_phrases`); the same error in English is the one the English tests read,
and it is checked to hold such phrases, so the scan can fail.
"""

from __future__ import annotations

import pytest
from helpers import english_phrases

from edu_parallel.core.errors import ClusterClosedError, JobTimeoutError, WorkerError
from edu_parallel.core.i18n import language
from edu_parallel.engine import Cluster, demos
from edu_parallel.engine.failures import died_message
from edu_parallel.engine.matching import MessageSizeError


def message_in(lang: str, cluster: Cluster, fn, *args, error=WorkerError, **kwargs) -> str:
    with language(lang), pytest.raises(error) as info:
        cluster.run(fn, *args, **kwargs)
    return str(info.value.args[0])  # the message, as the tour prints it (no remote traceback)


def assert_chinese(en: str, zh: str) -> None:
    assert english_phrases(en), f"the scan finds nothing in the English:\n{en}"
    assert not english_phrases(zh), f"English in the Chinese: {english_phrases(zh)}\n{zh}"
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh), zh


def test_a_rank_that_raises_is_named_in_chinese(cluster4) -> None:
    en = message_in("en", cluster4, demos.raise_on, 1)
    zh = message_in("zh", cluster4, demos.raise_on, 1)
    assert en.startswith("rank 1 raised during job raise_on, at: step 0: about to all-reduce")
    assert_chinese(en, zh)
    assert "rank 1" in zh and "raise_on" in zh and "第 0 步" in zh and "RuntimeError" in zh


def test_a_hang_times_out_in_chinese_with_and_without_the_watchdog() -> None:
    with Cluster(2, timeout=1) as c:
        en = message_in("en", c, demos.skip_collective, 1, error=JobTimeoutError)
        zh = message_in("zh", c, demos.skip_collective, 1, error=JobTimeoutError)
    assert "timed out after 1 s: rank 1 never entered all_reduce #1 (group world)" in en
    assert "in which rank 0 has waited for 1.0 s; rank 1 finished the job" in en
    assert_chinese(en, zh)
    assert "rank 1 从未进入 all_reduce #1（group world（全体 rank））" in zh
    with Cluster(2, timeout=1, watchdog=True) as c:
        en = message_in("en", c, demos.skip_collective, 1, error=JobTimeoutError)
        zh = message_in("zh", c, demos.skip_collective, 1, error=JobTimeoutError)
    assert "made no progress for 1 s (no rank took a step, sent or received)" in en
    assert_chinese(en, zh)


def sends_16_receives_32(ctx) -> None:
    """Rank 0 sends 16 floats at step 3; rank 1 receives into 32 (a MessageSizeError)."""
    import torch

    if ctx.rank == 0:
        ctx.send(torch.ones(16), 1, step=3, chunk=2)
    else:
        ctx.recv(torch.zeros(32), 0, step=3, chunk=2)


def test_a_message_of_another_size_is_named_in_chinese(cluster2) -> None:
    en = message_in("en", cluster2, sends_16_receives_32, error=MessageSizeError)
    zh = message_in("zh", cluster2, sends_16_receives_32, error=MessageSizeError)
    assert en.startswith("rank 1 received a message of 64 B from rank 0 at step 3 (chunk 2)")
    assert_chinese(en, zh)
    assert zh.startswith("第 3 步：rank 1 从 rank 0 收到一条 64 B 的消息（分块 2）")


def test_a_closed_cluster_and_a_dead_rank_in_chinese() -> None:
    c = Cluster(2)
    c.close()
    en = message_in("en", c, demos.hello, error=ClusterClosedError)
    zh = message_in("zh", c, demos.hello, error=ClusterClosedError)
    assert en == "this cluster is closed; create a new one: Cluster(2)"
    assert_chinese(en, zh)
    assert "Cluster(2)" in zh
    # a death: what the cluster says after a rank's process ended (the run itself is in
    # test_cluster.py; which rank is seen first to go is a race, its text is not)
    with language("en"):
        en = died_message(1, -9, "job die_on", "step 0: computing before the all-reduce")
    with language("zh"):
        zh = died_message(1, -9, "作业 die_on", "第 0 步：AllReduce 之前的计算")
    assert en == (
        "rank 1 died (killed by SIGKILL) during job die_on, at: step 0: computing before the"
        " all-reduce. The workers were stopped; the next run starts fresh ones."
    )
    assert_chinese(en, zh)
    assert "SIGKILL" in zh
