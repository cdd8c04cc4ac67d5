"""MemDaily loader and MemoryBank distractor pool on small generated files."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone

import pytest

from memlab.bench.datasets import memdaily as M
from memlab.bench.datasets.memdaily import load_memdaily, load_memorybank_pool, parse_memdaily_time
from memlab.errors import DatasetError, InvalidInput

UTC = timezone.utc
POOL = [f"今天天气不错，第{i}天" for i in range(10)]  # the texts conftest writes into memorybank/cn


def test_counts_and_error_filter(memdaily_root):
    ds = load_memdaily(memdaily_root)
    assert ds.conversations() == ["01_simple_roles:1", "03_comparative_events:1"]
    assert len(ds.items) == 3 + 2 and len(ds.questions) == 2
    # tid 2: [ERRORQ] (also [ERRORA]) counts once as ERRORQ; tid 3: [ERRORA]; their 2 + 2 messages go too
    assert ds.report.dropped == {M.DROP_ERRORQ: 1, M.DROP_ERRORA: 1, M.DROP_STREAM_MESSAGES: 4,
                                 M.DROP_UNKNOWN_TARGET: 1}
    assert ds.summary()["categories"] == {"comparative": 1, "simple": 1}


def test_items_and_questions_exactly(memdaily_root):
    ds = load_memdaily(memdaily_root)
    first = ds.items_of("01_simple_roles:1")[0]
    assert (first.item_id, first.speaker, first.session_id, first.text) == ("0", "user", "2024-04-01",
                                                                          "我表弟的邮箱是a@b.com。")
    assert first.timestamp == datetime(2024, 4, 1, 8, 36, tzinfo=UTC)
    assert first.meta == {"place": "上海"}
    q = ds.questions_of("01_simple_roles:1")[0]
    assert (q.query_id, q.category, q.evidence) == ("0", "simple", ("1",))
    assert q.asked_at == datetime(2024, 4, 5, 7, 54, tzinfo=UTC)
    assert q.meta["scenario"] == "roles" and q.meta["answer"] == "杭州" and q.meta["ground_truth"] == "A"
    cmp_q = ds.questions_of("03_comparative_events:1")[0]
    assert cmp_q.evidence == ("0", "1")  # target 7 names no message
    # messages out of time order in the source are sorted by time
    assert [i.item_id for i in ds.items_of("03_comparative_events:1")] == ["1", "0"]


def test_time_parser():
    assert parse_memdaily_time("2024年04月01日 周一 08:39", tz=UTC) == datetime(2024, 4, 1, 8, 39, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_memdaily_time("2024-04-01 08:39", tz=UTC)


def test_pool_reader(memdaily_root):
    pool_dir = memdaily_root.parent / "memorybank" / "cn"
    assert load_memorybank_pool(pool_dir) == POOL  # the repeat and the blank query are left out
    with_replies = load_memorybank_pool(pool_dir / "memory_bank_cn.json", include_responses=True)
    # 10 queries + replies 回复0-9 + 重复 (reply to the repeated query) + 空 (reply to the blank query)
    assert len(with_replies) == 10 + 10 + 2
    assert "空" in with_replies and "  " not in with_replies
    with pytest.raises(DatasetError, match="memory_bank"):
        load_memorybank_pool(memdaily_root)


def test_noise_infusion(memdaily_root):
    ds = load_memdaily(memdaily_root, noise=2, seed=7)
    simple = ds.items_of("01_simple_roles:1")
    noise = [i for i in simple if i.meta.get("distractor")]
    assert len(simple) == 3 + 2 * 3 and len(noise) == 6
    assert len(ds.items_of("03_comparative_events:1")) == 2 + 2 * 2
    assert sorted(i.item_id for i in noise) == [f"noise-{k}" for k in range(6)]
    assert all(i.meta == {"distractor": True} and i.speaker == "user" for i in noise)
    # from the pool only, never from MemDaily; six distinct texts (the pool of ten suffices)
    assert {i.text for i in noise} <= set(POOL) and len({i.text for i in noise}) == 6
    lo, hi = datetime(2024, 4, 1, 8, 36, tzinfo=UTC), datetime(2024, 4, 2, 7, 6, tzinfo=UTC)
    assert all(lo <= i.timestamp <= hi for i in noise)
    assert ds.questions == load_memdaily(memdaily_root).questions  # questions untouched
    assert ds.card.version == "MemDaily;noise=2;seed=7"


def test_noise_is_seeded(memdaily_root):
    a = load_memdaily(memdaily_root, noise=2, seed=7)
    assert a == load_memdaily(memdaily_root, noise=2, seed=7)
    assert a.content_hash() == load_memdaily(memdaily_root, noise=2, seed=7).content_hash()
    assert a.content_hash() != load_memdaily(memdaily_root, noise=2, seed=8).content_hash()


def test_noise_per_stream_does_not_depend_on_other_streams(memdaily_root, tmp_path):
    both = load_memdaily(memdaily_root, noise=2, seed=1)
    (memdaily_root / "messages_and_QAs" / "03_comparative_events.json").unlink()
    alone = load_memdaily(memdaily_root, noise=2, seed=1)
    assert alone.items_of("01_simple_roles:1") == both.items_of("01_simple_roles:1")


def test_pool_smaller_than_needed_is_reused_and_noted(memdaily_root):
    ds = load_memdaily(memdaily_root, noise=5, seed=0)  # 15 distractors for a 3-message stream, pool of 10
    noise = [i for i in ds.items_of("01_simple_roles:1") if i.meta.get("distractor")]
    uses = Counter(i.text for i in noise)
    assert len(noise) == 15 and set(uses) == set(POOL) and max(uses.values()) == 2
    assert any("reused" in n for n in ds.report.notes)


def test_explicit_pool_and_missing_pool(memdaily_root, tmp_path):
    ds = load_memdaily(memdaily_root / "messages_and_QAs", noise=1, pool=["噪声"])
    assert {i.text for i in ds.items if i.meta.get("distractor")} == {"噪声"}
    lonely = tmp_path / "elsewhere" / "memdaily"
    lonely.parent.mkdir()
    (memdaily_root).rename(lonely)
    assert len(load_memdaily(lonely).items) == 5  # no pool needed without noise
    with pytest.raises(DatasetError, match="pool_path") as err:
        load_memdaily(lonely, noise=9)
    assert err.value.field == "pool_path"


@pytest.mark.parametrize("kw, field", [({"noise": -1}, "noise"), ({"noise": 1.5}, "noise"),
                                       ({"seed": -3}, "seed"), ({"noise": 1, "pool": []}, "pool")])
def test_bad_options(memdaily_root, kw, field):
    with pytest.raises(InvalidInput) as err:
        load_memdaily(memdaily_root, **kw)
    assert err.value.field == field


def test_bad_time_names_file_and_field(memdaily_root):
    f = memdaily_root / "messages_and_QAs" / "01_simple_roles.json"
    data = json.loads(f.read_text(encoding="utf-8"))
    data[0]["message_list"][2]["time"] = "April 2"
    f.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_memdaily(memdaily_root)
    assert err.value.field == "01_simple_roles:1.message_list[2].time" and "01_simple_roles.json" in err.value.file
