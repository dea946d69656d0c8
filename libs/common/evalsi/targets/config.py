"""How a model target is called: its connector config, prices and prompt template (from ``spec.target.model``)."""

from __future__ import annotations

import re
from typing import Any

from evalsi.errors import BadInputError
from evalsi.judges import PROVIDERS, JudgeConfig
from evalsi.records import struct_dict
from evalsi.v1alpha1.run_pb2 import ModelTarget

# Keys of ``spec.target.model.params`` that configure how Evals.si calls the target; they are never sent
# to the provider. Everything else in params is (temperature, max_tokens, seed, ...).
TARGET_CALL_PARAMS = (
    "price_per_1k_input",
    "price_per_1k_output",
    "timeout_s",
    "max_retries",
    "rpm",
    "tpm",
)
TEMPLATE_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.\-/]*)\s*\}\}")
DEFAULT_PROMPT_TEMPLATE = "{{input}}"


def target_config(model: ModelTarget, *, seed: int | None = None) -> JudgeConfig:
    """The connector config that calls a model target (the judges' connectors, retries and limits).

    ``params`` go to the provider except :data:`TARGET_CALL_PARAMS`; no temperature is imposed (the
    provider's default applies unless params set one). ``seed``, when given, replaces any seed in params.
    """
    where = "spec.target.model"
    params = struct_dict(model, "params")
    call = {key: params.pop(key) for key in TARGET_CALL_PARAMS if key in params}
    for key in ("price_per_1k_input", "price_per_1k_output"):
        if key in call and (isinstance(call[key], bool) or not isinstance(call[key], int | float) or call[key] < 0):
            raise BadInputError(f"{where}.params.{key}: must be a number >= 0 (USD per 1,000 tokens)")
    if seed is not None:
        params["seed"] = seed
    mapping: dict[str, Any] = {
        "name": "target",
        "model": model.model,
        "provider": model.connector or "openai",
        "params": {"temperature": None, **params},
    }
    if not model.model:
        raise BadInputError(f"{where}.model: required (the provider's model id)")
    if model.connector and model.connector not in PROVIDERS:
        raise BadInputError(f"{where}.connector: must be one of {', '.join(PROVIDERS)}, got {model.connector!r}")
    if model.base_url:
        mapping["base_url"] = model.base_url
    if model.api_key_env:
        mapping["api_key_env"] = model.api_key_env
    for key in ("timeout_s", "max_retries", "rpm", "tpm"):
        if key in call:
            mapping[key] = call[key]
    return JudgeConfig.from_mapping(mapping, where=where)


def target_prices(model: ModelTarget) -> tuple[float, float] | None:
    """USD per 1,000 input and output tokens, when the spec gives both (or either: the other is 0)."""
    params = struct_dict(model, "params")
    if "price_per_1k_input" not in params and "price_per_1k_output" not in params:
        return None
    return float(params.get("price_per_1k_input", 0.0)), float(params.get("price_per_1k_output", 0.0))


def template_placeholders(template: str) -> list[str]:
    return [match.group(1) for match in TEMPLATE_PLACEHOLDER.finditer(template)]
