"""Config validation: every mistake names the file and the field."""

from __future__ import annotations

import pytest

from evalsi.errors import BadInputError
from evalsi.harness import config_from_mapping, load_config


def _error(doc: dict) -> str:
    with pytest.raises(BadInputError) as info:
        config_from_mapping({"model": {"model": "m"}, **doc}, source="h.yaml")
    return str(info.value)


def test_valid_config_with_run_spec_spellings() -> None:
    config = config_from_mapping({
        "model": {"provider": "anthropic", "model": "claude"},
        "maxSteps": 7, "budget": {"tokens": 100, "usd": 0.5, "wallClock": "10m"},
        "pricing": {"input_per_mtok": 3, "output_per_mtok": 15},
        "tools": {"python": ["pkg.mod:fn"], "mcp": [{"url": "http://x/mcp"}, {"command": "python server.py"}]},
        "faults": [{"tool": "fn", "kind": "timeout", "rate": 0.1, "calls": [2]}],
    }, source="h.yaml")
    assert config.max_steps == 7 and config.budget.wall_clock_s == 600.0 and config.budget.usd == 0.5
    assert config.mcp_servers[1].command == ("python", "server.py")
    assert config.faults[0].calls == frozenset({2})


@pytest.mark.parametrize(("doc", "message"), [
    ({"max_steps": 0}, "h.yaml: max_steps: expected an integer >= 1, got 0"),
    ({"budget": {"wall_clock": "soon"}}, "h.yaml: budget.wall_clock: expected a duration like 30s"),
    ({"tools": {"python": ["nocolon"]}}, 'h.yaml: tools.python[0]: expected "package.module:function"'),
    ({"tools": {"mcp": [{"url": "http://x", "command": ["a"]}]}}, "h.yaml: tools.mcp[0]: give exactly one of url"),
    ({"mocks": {"t": {"result": 1, "error": "x"}}}, "h.yaml: mocks.t: give exactly one of result, results"),
    ({"faults": [{"tool": "t", "kind": "crash", "rate": 1}]}, "h.yaml: faults[0].kind: must be one of timeout, "
                                                              "error, malformed"),
    ({"faults": [{"tool": "t", "kind": "error", "rate": 2}]}, "h.yaml: faults[0].rate: must be between 0 and 1"),
    ({"model": {"model": "m", "provider": "cohere"}}, "h.yaml: model.provider: must be one of"),
    ({"sytem": "x"}, "h.yaml: sytem: unknown key (did you mean system?)"),
])
def test_errors_name_the_file_and_field(doc: dict, message: str) -> None:
    assert message in _error(doc)


def test_missing_file_and_bad_yaml(tmp_path) -> None:
    with pytest.raises(BadInputError, match=r"nope\.yaml: cannot read the harness config"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed")
    with pytest.raises(BadInputError, match=r"bad\.yaml: not valid YAML"):
        load_config(bad)
