"""Pack tiers (Pack, Registry.from_entry_points) and the evaluators: section (evalsi.pack_policy), as pure functions:
which packs a project has allowed and enabled, and every mistake in the section named by its key."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.connections import Connections
from evalsi.errors import BadInputError
from evalsi.evaluators import Pack, Registry
from evalsi.pack_policy import PackPolicy, ProjectPacks, load_pack_policy
from evalsi.packs.core import PACK as CORE
from evalsi.service.config import Config

INSTALLED = {"core": True, "judge": False, "rag": False, "agent": False}
SECTION = {
    "packs": ["core", "judge"],
    "allowed_packs": ["core", "judge", "agent"],
    "projects": {
        "support": {"packs": ["core", "agent"]},
        "locked": {"allowed_packs": ["core"]},
    },
}


def test_without_a_section_core_is_on_and_every_installed_pack_allowed() -> None:
    policy = load_pack_policy(None)
    assert policy == PackPolicy()
    assert policy.enabled("any", INSTALLED) == {"core"}
    assert policy.allowed("any", INSTALLED) == set(INSTALLED)


def test_a_project_replaces_the_install_wide_lists_and_never_enables_outside_its_allowlist() -> None:
    policy = load_pack_policy(SECTION)
    assert policy.enabled("default", INSTALLED) == {"core", "judge"}
    assert policy.allowed("default", INSTALLED) == {"core", "judge", "agent"}
    assert policy.enabled("support", INSTALLED) == {"core", "agent"}
    assert policy.allowed("support", INSTALLED) == {"core", "judge", "agent"}  # inherited
    # The install-wide packs name judge; the project's allowlist leaves it out, so it is not on there.
    assert policy.enabled("locked", INSTALLED) == {"core"}
    assert policy.allowed("locked", INSTALLED) == {"core"}
    # A pack that is not installed is neither, whatever the lists say.
    assert "rag" not in policy.allowed("default", {"core": True})


def test_the_section_survives_the_file_the_api_reads() -> None:
    connections = Connections.from_mapping(None, None, evaluators=SECTION)
    assert connections.packs == load_pack_policy(SECTION)
    document = connections.to_document()
    assert document["evaluators"] == SECTION
    assert Connections.from_mapping(None, None, evaluators=document["evaluators"]).packs == connections.packs
    assert "evaluators" not in Connections().to_document()  # nothing configured writes nothing


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"pack": ["core"]}, "evalsi.yaml: evaluators: pack: unknown key; did you mean packs?"),
        ({"packs": "core"}, "evalsi.yaml: evaluators.packs: expected a list of pack names like [core, judge]"),
        ({"packs": ["x" * 65]}, "evaluators.packs: expected a list of pack names"),
        ({"allowed_packs": ["p"] * 129}, "evaluators.allowed_packs: 129 packs exceed the limit of 128"),
        ({"projects": {"a.b": {}}}, "evaluators.projects: 'a.b' is not a valid project name"),
        ({"projects": {"a": {"allowed": []}}},
         "evaluators.projects.a: allowed: unknown key; did you mean allowed_packs?"),
        ({"projects": ["a"]}, "evaluators.projects: expected a mapping"),
        ({"packs": ["core", "rag"], "allowed_packs": ["core"]},
         "evaluators.packs: rag not in allowed_packs (core); allow them or leave them out"),
        ({"projects": {"a": {"packs": ["rag"], "allowed_packs": []}}},
         "evaluators.projects.a.packs: rag not in allowed_packs (none)"),
    ],
)
def test_a_bad_section_is_refused_naming_the_key(section: object, message: str) -> None:
    with pytest.raises(BadInputError) as refused:
        load_pack_policy(section)
    assert message in str(refused.value)


def test_evalsi_yaml_takes_the_section_and_names_a_pack_that_is_not_installed() -> None:
    config = Config.from_mapping({"evaluators": {"packs": ["core", "rgg"]}}, where="evalsi.yaml")
    assert config.connections.packs.packs == ("core", "rgg")
    # The api checks the names against its registry at start (evalsi_api.main.assemble).
    assert config.connections.packs.unknown_packs(INSTALLED) == [
        "evalsi.yaml: evaluators.packs: 'rgg' is not an installed pack; did you mean rag?"
    ]
    policy = PackPolicy(projects={"a": ProjectPacks(allowed_packs=("zzz",))})
    assert policy.unknown_packs(INSTALLED) == [
        "evalsi.yaml: evaluators.projects.a.allowed_packs: 'zzz' is not an installed pack; installed: agent, core, "
        "judge, rag"
    ]


def test_a_pack_declares_its_tier_and_a_wrapped_one_pins_its_upstream() -> None:
    assert CORE.tier == "native" and CORE.upstream == ""
    wrapped = Pack("ragas", (), tier="wrapped", upstream="ragas==0.2.15")
    assert Registry([wrapped]).packs["ragas"].upstream == "ragas==0.2.15"
    with pytest.raises(BadInputError, match="tier 'beta' is not one of native, wrapped, community"):
        Pack("x", (), tier="beta")
    with pytest.raises(BadInputError, match="a wrapped pack pins its upstream package"):
        Pack("x", (), tier="wrapped")
    with pytest.raises(BadInputError, match=r"upstream 'ragas>=0.2' must pin one release as name==version"):
        Pack("x", (), tier="wrapped", upstream="ragas>=0.2")


@pytest.fixture
def third_party(tmp_path: Path) -> Iterator[str]:
    """A distribution other than evalsi, installed on sys.path as pip would (a dist-info with entry points), whose
    packs claim native and wrapped tiers."""
    group = "evalsi.packs.test-third-party"
    (tmp_path / "acme_packs.py").write_text(textwrap.dedent("""
        from evalsi.evaluators import Pack, evaluator

        @evaluator("acme/shouts", version="1.0.0")
        def shouts(output: str) -> bool:
            return output.isupper()

        NATIVE = Pack("acme", (shouts,), description="claims native")
        WRAPPED = Pack("acme-ragas", (), tier="wrapped", upstream="ragas==0.2.15")
    """))
    info = tmp_path / "acme_packs-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-packs\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{group}]\nacme = acme_packs:NATIVE\nacme-ragas = acme_packs:WRAPPED\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield group
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("acme_packs", None)


def test_packs_another_distribution_installs_are_community_whatever_they_declare(third_party: str) -> None:
    registry = Registry.from_entry_points(third_party)
    assert {name: (p.tier, p.upstream) for name, p in registry.packs.items()} == {
        "acme": ("community", ""),
        "acme-ragas": ("community", "ragas==0.2.15"),
    }
    evaluator = registry.evaluators("acme")[0]
    assert registry.manifest(evaluator).tier == "community"
    # evalsi's own packs keep the tier they declare.
    own = Registry.from_entry_points()
    assert own.packs["core"].tier == "native"
    assert own.manifest(own.resolve("builtin/exact-match")).tier == "native"
