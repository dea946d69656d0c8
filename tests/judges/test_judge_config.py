import dataclasses
import pickle

import pytest

from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig


def test_openai_defaults() -> None:
    c = JudgeConfig(model="gpt-4o-mini")
    assert (c.name, c.provider, c.base_url, c.api_key_env) == (
        "default", "openai", "https://api.openai.com/v1", "OPENAI_API_KEY")
    assert c.params == {"temperature": 0}
    assert (c.timeout_s, c.max_retries, c.rpm, c.tpm, c.template) == (60.0, 4, None, None, None)


def test_anthropic_defaults() -> None:
    c = JudgeConfig.from_mapping({"provider": "anthropic", "model": "claude-3-5-haiku-latest"})
    assert (c.base_url, c.api_key_env) == ("https://api.anthropic.com", "ANTHROPIC_API_KEY")


def test_openai_compatible_is_an_alias_sharing_identity() -> None:
    local = JudgeConfig.from_mapping({"provider": "openai-compatible", "model": "m", "base_url": "http://h:8000/v1/"})
    assert local.provider == "openai"
    assert local.base_url == "http://h:8000/v1"  # trailing slash dropped so URL joins stay clean
    same = JudgeConfig(model="m", provider="openai", base_url="http://h:8000/v1")
    assert local.identity() == same.identity()


def test_identity_covers_answers_not_call_policy() -> None:
    a = JudgeConfig(model="m", params={"seed": 1}, rpm=10, timeout_s=5, max_retries=0, name="a")
    b = JudgeConfig(model="m", params={"seed": 1}, rpm=99, timeout_s=50, max_retries=9, name="b")
    assert a.identity() == b.identity() == {
        "provider": "openai", "model": "m", "base_url": "https://api.openai.com/v1",
        "params": {"temperature": 0, "seed": 1}}
    assert JudgeConfig(model="m", params={"temperature": 0.7}).identity() != a.identity()


def test_params_are_copied_and_temperature_can_be_overridden() -> None:
    given = {"temperature": 0.5, "max_tokens": 200}
    c = JudgeConfig.from_mapping({"model": "m", "params": given})
    given["temperature"] = 2.0
    assert c.params == {"temperature": 0.5, "max_tokens": 200}


def test_frozen_hashable_and_picklable() -> None:
    c = JudgeConfig(model="m", params={"seed": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.model = "other"  # type: ignore[misc]
    assert hash(c) == hash(JudgeConfig(model="m", params={"seed": 3}))
    assert pickle.loads(pickle.dumps(c)) == c
    assert dataclasses.asdict(c)["params"] == {"temperature": 0, "seed": 3}


def test_api_key_from_env_or_none_for_local_servers() -> None:
    c = JudgeConfig(model="m", api_key_env="MY_KEY")
    assert c.api_key({"MY_KEY": "sk-1"}) == "sk-1"
    assert c.api_key({}) is None
    assert c.api_key({"MY_KEY": ""}) is None


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"model": "m", "provider": "azure"},
         "judges.default.provider: must be one of openai, openai-compatible, anthropic, got 'azure'"),
        ({"provider": "openai"}, "judges.default.model: required"),
        ({"model": ""}, "judges.default.model: must be a non-empty string"),
        ({"model": 7}, "judges.default.model: must be a non-empty string, got int 7"),
        ({"model": "m", "temprature": 0}, "judges.default.temprature: unknown key"),
        ({"model": "m", "timeout_s": "60"}, "judges.default.timeout_s: must be a number, got str '60'"),
        ({"model": "m", "timeout_s": 0}, "judges.default.timeout_s: must be > 0"),
        ({"model": "m", "max_retries": -1}, "judges.default.max_retries: must be >= 0, got -1"),
        ({"model": "m", "max_retries": 1.5}, "judges.default.max_retries: must be an integer"),
        ({"model": "m", "rpm": True}, "judges.default.rpm: must be an integer, got bool True"),
        ({"model": "m", "tpm": 0}, "judges.default.tpm: must be >= 1, got 0"),
        ({"model": "m", "base_url": "api.openai.com"}, "judges.default.base_url: must start with http://"),
        ({"model": "m", "params": [1]}, "judges.default.params: must be a mapping"),
        ({"model": "m", "params": {"stream": True}}, "judges.default.params.stream: set by Evals.si itself"),
        ({"model": "m", "params": {"max_tokens": "9"}}, "judges.default.params.max_tokens: must be an integer"),
        ({"model": "m", "params": {"temperature": "hot"}}, "judges.default.params.temperature: must be a number"),
        ({"model": "m", "params": {"x": float("nan")}}, "judges.default.params: values must be JSON"),
        ({"model": "m", "template": "pairwise"}, "judges.default.template: must be \"name@version\""),
    ],
)
def test_from_mapping_errors_name_the_field_path(mapping: dict, message: str) -> None:
    with pytest.raises(BadInputError) as e:
        JudgeConfig.from_mapping(mapping, where="judges.default")
    assert str(e.value).startswith(message), str(e.value)


def test_integer_params_read_back_from_a_spec_as_doubles_are_integers() -> None:
    # evaluate(judge={"params": {"max_tokens": 512}}) stores the params in the run spec's protobuf Struct,
    # which gives every number back as a double.
    c = JudgeConfig.from_mapping({"model": "m", "params": {"max_tokens": 512.0, "seed": 7.0, "top_p": 0.5}})
    assert c.params == {"temperature": 0, "max_tokens": 512, "seed": 7, "top_p": 0.5}  # temperature: the default
    assert isinstance(c.params["max_tokens"], int)
    with pytest.raises(BadInputError, match=r"params\.max_tokens: must be an integer, got float 512\.5"):
        JudgeConfig.from_mapping({"model": "m", "params": {"max_tokens": 512.5}})


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(BadInputError, match=r"judge\.api_key_evn: unknown key \(did you mean api_key_env\?\)"):
        JudgeConfig.from_mapping({"model": "m", "api_key_evn": "K"})


def test_not_a_mapping() -> None:
    with pytest.raises(BadInputError, match=r"^judges\.x: must be a mapping of judge settings, got list"):
        JudgeConfig.from_mapping(["m"], where="judges.x")  # type: ignore[arg-type]


def test_full_mapping_round_trip() -> None:
    c = JudgeConfig.from_mapping({
        "name": "strict", "provider": "anthropic", "model": "claude", "base_url": "http://127.0.0.1:9/",
        "api_key_env": "K", "params": {"max_tokens": 50, "temperature": None}, "timeout_s": 5,
        "max_retries": 0, "rpm": 60, "tpm": 10000, "template": "pairwise@2",
    })
    assert c == JudgeConfig(model="claude", name="strict", provider="anthropic", base_url="http://127.0.0.1:9",
                            api_key_env="K", params={"max_tokens": 50, "temperature": None}, timeout_s=5.0,
                            max_retries=0, rpm=60, tpm=10000, template="pairwise@2")


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(BadInputError, match=r"^judge\.provider: must be one of"):
        JudgeConfig(model="m", provider="cohere")
