"""Online policies may name a plugin's evaluators: evalsi-policy reads --plugins-dir (EVALSI_PLUGINS_DIR, as every
service does) and registers what each plugin hosts from its Describe answer; the workers' pools run them."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.pack_policy import load_pack_policy
from evalsi.plugins import describe_plugins
from evalsi_policy.main import build_parser, load_files

POLICY = """
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: words, project: support}
spec:
  sampling: {rate: 1.0}
  cascade: [{ref: acme/has-word, params: {word: ok}}]
"""


def test_the_policy_service_takes_the_plugins_dir_from_its_flag_or_the_shared_variable(plugins_dir: Path) -> None:
    assert build_parser({}).parse_args(["--plugins-dir", str(plugins_dir)]).plugins_dir == str(plugins_dir)
    assert build_parser({"EVALSI_PLUGINS_DIR": str(plugins_dir)}).parse_args([]).plugins_dir == str(plugins_dir)


def test_a_policy_naming_a_plugins_evaluator_compiles_once_the_plugin_is_described(
        plugins_dir: Path, venv_cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "words.yaml"
    path.write_text(POLICY)
    packs = load_pack_policy({"projects": {"support": {"packs": ["core", "acme/checks"]}}})
    with pytest.raises(BadInputError, match="acme/has-word"):
        load_files([str(path)], Registry.from_entry_points(), packs)
    registry = Registry.from_entry_points()
    describe_plugins(registry, plugins_dir, cache_dir=venv_cache)
    [policy] = load_files([str(path)], registry, packs)
    assert policy.name == "words" and policy.project == "support"
    with pytest.raises(BadInputError, match=r"has not enabled pack\(s\) acme/checks"):
        load_files([str(path)], registry)  # only core is on without an evaluators: section
