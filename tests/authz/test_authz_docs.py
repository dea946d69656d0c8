"""docs/auth.md prints the permission list and the action table as the registry has them, and its example
configuration loads."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from evalsi.auth.principal import Principal
from evalsi.authz.actions import markdown_table as action_table
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.decision import AccessRequest
from evalsi.authz.permissions import markdown_table as permission_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "auth.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _table_after(section: str, marker: str) -> str:
    lines = section[section.index(marker):].splitlines()[1:]
    table = [line for line in lines[: next((i for i, line in enumerate(lines) if not line.startswith("|")),
                                            len(lines))]]
    return "\n".join(table)


def test_the_docs_action_table_is_the_registry() -> None:
    section = _section("The action table")
    assert _table_after(section, "<!-- action-table:") == action_table(), (
        "docs/auth.md's action table differs from evalsi.authz.actions: paste markdown_table()'s output")


def test_the_docs_permission_table_is_the_registry() -> None:
    section = _section("Authorization")
    assert _table_after(section, "<!-- permissions-table:") == permission_table()


def test_the_docs_example_configuration_loads_and_decides() -> None:
    block = re.search(r"```yaml\n(rbac:.*?)```", _section("Authorization"), re.S)
    assert block is not None
    config = yaml.safe_load(block.group(1))
    authorizer = Authorizer.from_config(config["rbac"], config["authorization"])
    lead = Principal(kind="user", provider="corp", subject="l", groups=("support-leads",))
    assert authorizer.decide(AccessRequest(lead, "access.manage", "support")).allowed
    auditor = Principal(kind="user", provider="corp", subject="a", groups=("auditors",))
    assert authorizer.decide(AccessRequest(auditor, "audit.read", "anything")).allowed
    assert not authorizer.decide(AccessRequest(auditor, "runs.read", "anything")).allowed
    assert len(authorizer.rules.deny) == 1 and len(authorizer.rules.require) == 2 and len(authorizer.rules.allow) == 1
