import asyncio
import json
from pathlib import Path
from typing import Any

from evalsi.judges import Completion, JudgeCache, JudgeConfig, cache_key, default_cache_dir

IDENTITY = JudgeConfig(model="m").identity()
MESSAGES = [{"role": "user", "content": "grade this"}]
ANSWER = Completion(text="4", input_tokens=10, output_tokens=1, model="m-2024", raw={"id": "x"})


def test_key_is_deterministic_and_covers_what_determines_the_answer() -> None:
    k = cache_key(IDENTITY, "tpl1", MESSAGES)
    assert len(k) == 64 and k == cache_key(dict(reversed(list(IDENTITY.items()))), "tpl1", MESSAGES)
    other_params = JudgeConfig(model="m", params={"temperature": 1}).identity()
    assert len({
        k,
        cache_key(IDENTITY, "tpl2", MESSAGES),
        cache_key(IDENTITY, "tpl1", [{"role": "user", "content": "grade that"}]),
        cache_key(other_params, "tpl1", MESSAGES),
        cache_key(JudgeConfig(model="m", base_url="http://local/v1").identity(), "tpl1", MESSAGES),
    }) == 5


async def test_round_trip_marks_cached_and_shards_by_prefix(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    key = cache.key(IDENTITY, "t", MESSAGES)
    assert await cache.get(key) is None
    await cache.put(key, ANSWER)
    got = await cache.get(key)
    assert got is not None and got.cached is True
    assert (got.text, got.input_tokens, got.output_tokens, got.model, got.raw) == ("4", 10, 1, "m-2024", {"id": "x"})
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] == [
        f"{key[:2]}/{key}.json"]  # and no temp files left behind


async def test_shared_between_instances_on_one_directory(tmp_path: Path) -> None:
    key = cache_key(IDENTITY, "t", MESSAGES)
    await JudgeCache(tmp_path).put(key, ANSWER)
    got = await JudgeCache(tmp_path).get(key)
    assert got is not None and got.text == "4"


async def test_corrupt_or_foreign_files_are_misses(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    key = cache.key(IDENTITY, "t", MESSAGES)
    path = cache.path_for(key)
    path.parent.mkdir(parents=True)
    good: dict[str, Any] = {"format": 1, "key": key, "completion": {"text": "4", "input_tokens": 1, "output_tokens": 1,
                                                     "model": "m", "cached": False, "raw": {}}}
    for content in [
        '{"format": 1, "key": "trunc',
        "",
        json.dumps({**good, "key": "0" * 64}),
        json.dumps({**good, "format": 99}),
        json.dumps({**good, "completion": {**good["completion"], "input_tokens": "1"}}),
        json.dumps([1, 2]),
    ]:
        path.write_text(content)
        assert await cache.get(key) is None, content
    path.write_text(json.dumps(good))
    assert await cache.get(key) is not None
    await cache.put(key, ANSWER)  # a corrupt file is simply overwritten
    hit = await cache.get(key)
    assert hit is not None and hit.text == "4"


async def test_disabled_cache_neither_reads_nor_writes(tmp_path: Path) -> None:
    key = cache_key(IDENTITY, "t", MESSAGES)
    await JudgeCache(tmp_path).put(key, ANSWER)
    off = JudgeCache(tmp_path, enabled=False)
    assert await off.get(key) is None
    await JudgeCache.disabled().put(cache_key(IDENTITY, "other", MESSAGES), ANSWER)
    assert JudgeCache.disabled().enabled is False
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1


async def test_concurrent_writers_of_one_key_leave_a_valid_file(tmp_path: Path) -> None:
    caches = [JudgeCache(tmp_path) for _ in range(8)]
    key = cache_key(IDENTITY, "t", MESSAGES)
    await asyncio.gather(*(c.put(key, ANSWER) for c in caches for _ in range(5)))
    got = await caches[0].get(key)
    assert got is not None and got.text == "4"
    assert len([p for p in tmp_path.rglob("*") if p.is_file()]) == 1


async def test_unwritable_directory_does_not_fail_the_call(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = JudgeCache(blocker)
    key = cache_key(IDENTITY, "t", MESSAGES)
    await cache.put(key, ANSWER)  # logged, not raised: the answer is still good
    assert await cache.get(key) is None


def test_default_directory_follows_env(tmp_path: Path) -> None:
    assert default_cache_dir({"EVALSI_CACHE_DIR": str(tmp_path)}) == tmp_path / "judge"
    assert default_cache_dir({}) == Path.home() / ".cache" / "evalsi" / "judge"


async def test_the_shared_cache_round_trips_through_an_object_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from evalsi.judges import Completion
    from evalsi.judges.cache import SharedJudgeCache, cache_key
    from evalsi.stores import LocalObjectStore

    objects = LocalObjectStore(tmp_path / "objects")
    first, second = SharedJudgeCache(objects), SharedJudgeCache(objects)
    key = cache_key({"model": "m"}, "t", [{"role": "user", "content": "hi"}])
    assert await first.get(key) is None
    await first.put(key, Completion(text="yes", input_tokens=3, output_tokens=1, model="m"))
    await second.put(key, Completion(text="other", input_tokens=3, output_tokens=1, model="m"))  # first write wins
    hit = await second.get(key)
    assert hit is not None and hit.text == "yes" and hit.cached
