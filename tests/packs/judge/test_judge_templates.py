"""Judge prompt templates: built-ins, rendering, hashing, placeholder checks, files and selection."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.packs.judge import PACK
from evalsi.packs.judge.templates import (
    KINDS,
    Template,
    builtin_template_refs,
    get_template,
    load_template_file,
    parse_template_text,
    register_template,
    select_template,
    template_refs,
    unregister_template,
)


def test_builtin_templates_load_with_their_kinds() -> None:
    assert builtin_template_refs() == ["llm-judge@1", "reference-correctness@1", "pairwise@1"]
    kinds = {ref: get_template(ref).kind for ref in builtin_template_refs()}
    assert kinds == {"llm-judge@1": "rubric", "reference-correctness@1": "reference", "pairwise@1": "pairwise"}
    for ref in builtin_template_refs():
        template = get_template(ref)
        assert template.system and template.user
        assert set(template.placeholders) <= set(KINDS[template.kind])
        assert '"score"' in template.system  # each asks for the JSON answer
    assert set(get_template("pairwise@1").placeholders) >= {"output_a", "output_b"}
    assert set(get_template("llm-judge@1").placeholders) >= {"rubric", "output"}


def test_render_substitutes_and_keeps_json_braces() -> None:
    template = Template(
        name="t", version=1, kind="custom",
        system='Reply {"score": N}.', user="Q: {{input}}\nA: {{ output }}\n{literal} {{not a placeholder}}",
    )
    assert template.placeholders == ("input", "output")
    messages = template.render({"input": "2+2?", "output": "4"})
    assert messages == [
        {"role": "system", "content": 'Reply {"score": N}.'},
        {"role": "user", "content": "Q: 2+2?\nA: 4\n{literal} {{not a placeholder}}"},
    ]


def test_render_does_not_resubstitute_values() -> None:
    template = Template(name="t", version=1, kind="custom", system="", user="{{output}} / {{reference}}")
    messages = template.render({"output": "{{reference}}", "reference": "R"})
    assert messages == [{"role": "user", "content": "{{reference}} / R"}]  # no system part, no system message


def test_render_needs_every_used_value() -> None:
    template = Template(name="t", version=1, kind="custom", system="", user="{{output}} {{input}}")
    with pytest.raises(ValueError, match="input"):
        template.render({"output": "x"})


def test_hash_is_sha256_of_the_exact_text() -> None:
    template = get_template("llm-judge@1")
    assert template.hash == hashlib.sha256(template.text.encode()).hexdigest()
    assert template.text == f"---system---\n{template.system}\n---user---\n{template.user}"
    a = Template(name="t", version=1, kind="custom", system="S", user="U {{output}}")
    b = Template(name="t", version=1, kind="custom", system="S", user="U  {{output}}")
    c = Template(name="t", version=1, kind="custom", system="S.", user="U {{output}}")
    assert len({a.hash, b.hash, c.hash}) == 3
    assert a.hash == Template(name="other", version=9, kind="custom", system="S", user="U {{output}}").hash


def test_unknown_placeholder_names_it_and_the_accepted_ones() -> None:
    with pytest.raises(BadInputError) as info:
        Template(name="mine", version=2, kind="rubric", system="", user="{{output}} {{answer}} {{rubric}}")
    message = str(info.value)
    assert "mine@2" in message and "{{answer}}" in message
    for accepted in KINDS["rubric"]:
        assert "{{" + accepted + "}}" in message
    with pytest.raises(BadInputError, match=r"\{\{rubric\}\}"):  # placeholders are per kind
        Template(name="p", version=1, kind="pairwise", system="", user="{{output_a}} {{rubric}}")


def test_parse_template_text() -> None:
    assert parse_template_text("just {{output}}\n", "f") == ("", "just {{output}}")
    assert parse_template_text("---system---\nS\n---user---\nU\n", "f") == ("S", "U")
    assert parse_template_text("\n---user---\nU", "f") == ("", "U")
    for bad, error in [
        ("---system---\nS only", "no ---user---"),
        ("---user---\nU\n---system---\nS", "must come before"),
        ("preamble\n---system---\nS\n---user---\nU", "text before"),
        ("---system---\nS\n---user---\nU\n---user---\nV", "more than once"),
    ]:
        with pytest.raises(BadInputError, match=error):
            parse_template_text(bad, "f")


def test_template_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(BadInputError, match=r"nope\.txt.*no such file"):
        load_template_file(missing)
    bad = tmp_path / "bad.txt"
    bad.write_text("---system---\nS\n---user---\n{{output}} {{rubric}}\n")
    with pytest.raises(BadInputError) as info:
        load_template_file(bad)
    assert "bad.txt" in str(info.value) and "{{rubric}}" in str(info.value) and "{{context}}" in str(info.value)
    empty = tmp_path / "empty.txt"
    empty.write_text("---system---\nS\n---user---\n\n")
    with pytest.raises(BadInputError, match=r"empty\.txt.*user part is empty"):
        load_template_file(empty)


def test_template_file_is_reloaded_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("Grade {{output}}")
    first = load_template_file(path)
    assert load_template_file(path) is first  # cached
    path.write_text("Grade this: {{output}}")
    second = load_template_file(path)
    assert second.user == "Grade this: {{output}}" and second.hash != first.hash


def test_select_template_uses_an_override_of_the_same_kind_only() -> None:
    default = get_template("llm-judge@1")
    assert select_template("llm-judge@1", None) is default
    assert select_template("llm-judge@1", "pairwise@1") is default  # another kind: ignored
    mine = Template(name="strict-rubric", version=1, kind="rubric", system="S", user="{{rubric}} {{output}}")
    register_template(mine)
    try:
        assert "strict-rubric@1" in template_refs()
        assert select_template("llm-judge@1", "strict-rubric@1") is mine
        register_template(mine)  # same text again: fine
        with pytest.raises(BadInputError, match="already registered"):
            register_template(Template(name="strict-rubric", version=1, kind="rubric", system="T", user="{{output}}"))
    finally:
        unregister_template("strict-rubric@1")
    with pytest.raises(BadInputError, match=r"unknown judge template 'nope@3'.*llm-judge@1"):
        select_template("llm-judge@1", "nope@3")
    with pytest.raises(BadInputError, match="built in"):
        unregister_template("llm-judge@1")


def test_pack_manifest() -> None:
    assert PACK.name == "judge" and PACK.default_on is False
    names = sorted(e.name for e in PACK.evaluators)
    assert names == ["builtin/llm-judge", "builtin/pairwise-preference", "builtin/prompt-judge",
                     "builtin/reference-correctness"]
    for ev in PACK.evaluators:
        assert ev.version == "1.0.0" and ev.pack == "judge" and ev.is_async and ev.wants_context
        assert "judge" in ev.requires and ev.pool == "judge"
        assert all(p.description for p in ev.params)
        manifest = ev.manifest()
        assert manifest.name == ev.name and manifest.requires.judge
    by_name = {e.short_name: e for e in PACK.evaluators}
    assert by_name["pairwise-preference"].scope == "comparative"
    rubric = next(p for p in by_name["llm-judge"].params if p.name == "rubric")
    assert rubric.default == "correctness"
    assert rubric.choices == ("correctness", "helpfulness", "relevance", "faithfulness")
    template_file = next(p for p in by_name["prompt-judge"].params if p.name == "template_file")
    assert template_file.required
