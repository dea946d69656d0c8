"""The case store on SQLite and on a real Postgres: import (all or nothing, --keep-existing), export (byte for
byte, --force), tenant isolation (another tenant's case is indistinguishable from a missing one) and
``evalsi cases run --source store``."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from click.testing import CliRunner

from evalsi.cases.store import join_documents, split_documents
from evalsi.cases.testing import ScriptedAgent, ThreadedAgent
from evalsi.cli.main import cli
from evalsi.stores import StoredCase, open_metadata_store
from evalsi.testing.services import PostgresServer

CUPOM = """\
# Consult the active coupon with the tool; never invent one.
id: cupom
agent: shop
turns:
  - user: "any coupon?"
expect:
  tools_called: [search_voucher]
  reply_includes: [CHOCO10]
"""
# Two cases in one file, with comments around the document marker: what a YAML dump would lose.
PAIR = """\
id: greet
agent: shop
turns:
  - user: "oi"   # the shortest opening
expect:
  reply_includes: [ola]

# the second case of this file
---
id: cart
agent: shop
turns:
  - user: "add it"
expect:
  tools_called: [add_to_cart]
"""
OTHER_TENANT = """\
id: secret
agent: shop
tenant: store-b
turns:
  - user: "any coupon?"
"""
REPLIES = {
    "any coupon?": {"calls": [{"name": "search_voucher", "status": "ok"}], "reply": "Use CHOCO10."},
    "oi": {"reply": "Ola!"},
    "add it": {"calls": [{"name": "add_to_cart", "status": "ok"}], "reply": "Done."},
}


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty metadata store of each dialect: a new SQLite file, or a new database on the real server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'evalsi.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = f"t_{uuid.uuid4().hex[:16]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(server.dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    yield server.dsn_for(name)
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "golden"
    (root / "shop").mkdir(parents=True)
    (root / "cupom.yaml").write_text(CUPOM, encoding="utf-8")
    (root / "shop" / "pair.yaml").write_text(PAIR, encoding="utf-8")
    (root / "secret.yml").write_text(OTHER_TENANT, encoding="utf-8")
    return root


def cases(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["cases", *args])
    return result.exit_code, result.output


def stored(url: str, tenant: str = "platform") -> dict[str, StoredCase]:
    async def read() -> dict[str, StoredCase]:
        store = await open_metadata_store(url)
        try:
            return {case.case_id: case for case in await store.list_cases("default", tenant)}
        finally:
            await store.close()

    return asyncio.run(read())


def test_split_documents_concatenates_back_and_keeps_lines() -> None:
    pieces = split_documents(PAIR)
    assert "".join(piece for _, piece in pieces) == PAIR
    assert [line for line, _ in pieces] == [1, 9]  # the second starts at its `---`
    assert pieces[0][1].endswith("# the second case of this file\n") and pieces[1][1].startswith("---\nid: cart")


def test_join_documents_adds_only_the_markers_a_document_lacks() -> None:
    # Two first documents of one path (the file was restructured between imports) still make two documents.
    joined = join_documents([OTHER_TENANT.rstrip("\n"), "# lead comment\n" + CUPOM, "# lead\n---\n" + CUPOM])
    assert joined == OTHER_TENANT + "---\n# lead comment\n" + CUPOM + "# lead\n---\n" + CUPOM
    assert join_documents([CUPOM, OTHER_TENANT]) == CUPOM + "---\n" + OTHER_TENANT
    assert "".join(piece for _, piece in split_documents(PAIR)) == join_documents(
        [piece for _, piece in split_documents(PAIR)])


def test_import_is_all_or_nothing(store_url: str, corpus: Path) -> None:
    (corpus / "broken.yaml").write_text("id: broken\nagent: shop\nturns:\n  - user: hi\nexpect:\n"
                                        "  never_calls: 3\n", encoding="utf-8")
    code, output = cases("import", "--source", str(corpus), "--metadata-url", store_url)
    assert code == 2, output
    assert f"{corpus / 'broken.yaml'}:6: expect.never_calls: expected a list of strings" in output
    assert "nothing imported: 1 broken case(s)" in output
    assert stored(store_url) == {} and stored(store_url, "store-b") == {}


def test_import_replaces_unless_keep_existing(store_url: str, corpus: Path) -> None:
    code, output = cases("import", "--source", str(corpus), "--metadata-url", store_url)
    assert code == 0, output
    assert "imported 4 case(s)" in output and "tenants: platform 3, store-b 1" in output and "4 new" in output
    first = stored(store_url)
    assert sorted(first) == ["cart", "cupom", "greet"]
    assert (first["cart"].path, first["cart"].position, first["cart"].line) == ("shop/pair.yaml", 1, 9)
    assert first["cupom"].yaml == CUPOM and len(first["cupom"].yaml_hash) == 64

    edited = CUPOM.replace("CHOCO10", "CHOCO20")
    (corpus / "cupom.yaml").write_text(edited, encoding="utf-8")
    code, output = cases("import", "--source", str(corpus), "--metadata-url", store_url, "--keep-existing")
    assert code == 0 and "0 new, 0 replaced, 0 unchanged, 4 kept" in output, output
    assert stored(store_url)["cupom"].yaml == CUPOM

    code, output = cases("import", "--source", str(corpus), "--metadata-url", store_url)
    assert code == 0 and "0 new, 1 replaced, 3 unchanged, 0 kept" in output, output
    after = stored(store_url)
    assert after["cupom"].yaml == edited and after["cupom"].yaml_hash != first["cupom"].yaml_hash
    assert after["greet"].updated_at == first["greet"].updated_at  # unchanged cases are not rewritten


def test_export_round_trips_byte_for_byte_and_needs_force(store_url: str, corpus: Path, tmp_path: Path) -> None:
    assert cases("import", "--source", str(corpus), "--metadata-url", store_url)[0] == 0
    out = tmp_path / "exported"
    code, output = cases("export", "--dir", str(out), "--metadata-url", store_url)
    assert code == 0 and "2 file(s)" in output, output
    assert (out / "cupom.yaml").read_bytes() == (corpus / "cupom.yaml").read_bytes()
    assert (out / "shop" / "pair.yaml").read_bytes() == (corpus / "shop" / "pair.yaml").read_bytes()
    assert not (out / "secret.yml").exists()  # another tenant's case is not platform's to export

    (out / "cupom.yaml").write_text("# a comment someone added\n" + CUPOM, encoding="utf-8")
    code, output = cases("export", "--dir", str(out), "--metadata-url", store_url)
    assert code == 2 and "2 file(s) exist" in output and "pass --force" in output, output
    assert (out / "cupom.yaml").read_text(encoding="utf-8").startswith("# a comment someone added")
    code, output = cases("export", "--dir", str(out), "--metadata-url", store_url, "--force")
    assert code == 0, output
    assert (out / "cupom.yaml").read_text(encoding="utf-8") == CUPOM

    other = tmp_path / "store-b"
    assert cases("export", "--dir", str(other), "--metadata-url", store_url, "--tenant", "store-b")[0] == 0
    assert (other / "secret.yml").read_text(encoding="utf-8") == OTHER_TENANT


def test_a_file_split_between_tenants_exports_as_loadable_files(store_url: str, tmp_path: Path) -> None:
    corpus = tmp_path / "mixed"
    corpus.mkdir()
    # The platform case comes second, so alone it must still begin a document of its own.
    (corpus / "mixed.yaml").write_text(OTHER_TENANT + "---\n" + CUPOM, encoding="utf-8")
    assert cases("import", "--source", str(corpus), "--metadata-url", store_url)[0] == 0
    for tenant, expected in (("platform", ["cupom"]), ("store-b", ["secret"])):
        out = tmp_path / tenant
        assert cases("export", "--dir", str(out), "--metadata-url", store_url, "--tenant", tenant)[0] == 0
        code, output = cases("validate", "--source", str(out))
        assert code == 0 and "1 valid, 0 broken" in output, output
        assert expected[0] in (out / "mixed.yaml").read_text(encoding="utf-8")


def test_another_tenants_case_reads_as_missing(store_url: str, corpus: Path) -> None:
    assert cases("import", "--source", str(corpus), "--metadata-url", store_url)[0] == 0

    def show(case_id: str) -> tuple[int, str]:
        return cases("show", case_id, "--metadata-url", store_url)

    def run(case_id: str) -> tuple[int, str]:  # refused before any agent is reached
        return cases("run", "--source", "store", "--case", case_id, "--metadata-url", store_url, "--agent-url",
                     "http://127.0.0.1:9", "--no-report")

    for read in (show, run):
        (hidden_code, hidden), (missing_code, missing) = read("secret"), read("absent")
        assert hidden_code == missing_code == 2
        assert hidden.replace("secret", "ID") == missing.replace("absent", "ID")
        assert "case 'secret': not found in project 'default', tenant 'platform'" in hidden
    code, output = cases("list", "--metadata-url", store_url, "--format", "json")
    assert code == 0 and [c["id"] for c in json.loads(output)["cases"]] == ["cupom", "greet", "cart"]
    code, output = cases("show", "secret", "--metadata-url", store_url, "--tenant", "store-b")
    assert code == 0 and output == OTHER_TENANT


def test_run_from_the_store(store_url: str, corpus: Path, tmp_path: Path) -> None:
    assert cases("import", "--source", str(corpus), "--metadata-url", store_url)[0] == 0
    with ThreadedAgent(ScriptedAgent(agents={"shop": {"tools": ["search_voucher", "add_to_cart"]}},
                                     replies=REPLIES)) as agent:
        code, output = cases("run", "--source", "store", "--metadata-url", store_url, "--agent-url",
                             agent.base_url, "--format", "json", "--no-report")
        assert code == 0, output
        report = json.loads(output)
        assert {c["id"]: (c["status"], c["tenant"]) for c in report["cases"]} == {
            "cupom": ("pass", "platform"), "greet": ("pass", "platform"), "cart": ("pass", "platform")}
        # The line is the corpus file's, although the case was stored as a slice of it.
        assert next(c for c in report["cases"] if c["id"] == "cart")["where"] == "store:shop/pair.yaml:10"

        code, output = cases("run", "--source", "store", "--metadata-url", store_url, "--tenant", "store-b",
                             "--agent-url", agent.base_url, "--format", "json", "--no-report")
        assert code == 0, output
        assert [(c["id"], c["tenant"]) for c in json.loads(output)["cases"]] == [("secret", "store-b")]
        assert ("POST", "/v1/responses") in agent.requests


def test_a_stored_case_that_no_longer_validates_is_listed_and_run_as_broken(store_url: str, tmp_path: Path) -> None:
    async def tamper() -> None:
        store = await open_metadata_store(store_url)
        try:
            text = "id: old\nagent: shop\nturns:\n  - user: hi\nretired: true\n"  # a key the format dropped
            await store.put_cases("default", [StoredCase("platform", "old", "shop", "old.yaml", 0, 1, text)])
        finally:
            await store.close()

    asyncio.run(tamper())
    code, output = cases("list", "--metadata-url", store_url)
    assert code == 2 and "BROKEN store:old.yaml:5: retired: unknown key" in output, output
    code, output = cases("run", "--source", "store", "--metadata-url", store_url, "--agent-url",
                         "http://127.0.0.1:9", "--no-report")
    assert code == 2 and "BROKEN   old" in output, output


def test_the_store_comes_from_evalsi_yaml(tmp_path: Path, corpus: Path) -> None:
    database = tmp_path / "from-config.db"
    config = tmp_path / "evalsi.yaml"
    config.write_text(f"metadata: {{url: 'sqlite:///{database}'}}\n", encoding="utf-8")
    code, output = cases("import", "--source", str(corpus), "--config", str(config))
    assert code == 0, output
    assert sorted(stored(f"sqlite:///{database}")) == ["cart", "cupom", "greet"]


def test_tenant_filters_a_directory_source_the_same_way(corpus: Path) -> None:
    with ThreadedAgent(ScriptedAgent(agents={"shop": {"tools": ["search_voucher"]}}, replies=REPLIES)) as agent:
        code, output = cases("run", "--source", str(corpus), "--tenant", "store-b", "--agent-url", agent.base_url,
                             "--format", "json", "--no-report")
        assert code == 0, output
        assert [c["id"] for c in json.loads(output)["cases"]] == ["secret"]
        code, output = cases("run", "--source", str(corpus), "--tenant", "store-b", "--case", "cupom",
                             "--agent-url", agent.base_url, "--no-report")
        assert code == 2 and f"--case cupom: no such case under {corpus} for tenant 'store-b'" in output, output
