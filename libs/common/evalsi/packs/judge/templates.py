"""Versioned prompt templates for LLM judges: built-in ones by ``name@version``, and user template files.

A template has a system part and a user part. Placeholders are written ``{{input}}`` (double braces, so JSON
examples in a prompt need no escaping); ``render`` substitutes them in one pass, so a record whose output
happens to contain ``{{reference}}`` is not substituted again. Which placeholders a template may use depends
on its kind (``KINDS``); any other is a ``BadInputError`` naming it and the accepted ones.

``Template.hash`` is the sha256 of the template's exact text (system and user parts). Judge evaluators pass
it to ``JudgeClient.complete`` so that editing a template never reuses cached answers to the old one.

Template files are plain text with an optional split::

    ---system---
    You grade ...
    ---user---
    Question: {{input}}
    Answer: {{output}}

Without the markers the whole file is the user message (no system message is sent).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from evalsi.errors import BadInputError

Kind = Literal["rubric", "reference", "pairwise", "custom", "session", "rag", "attack"]

KINDS: Mapping[str, tuple[str, ...]] = {
    # llm-judge: one output graded against a rubric.
    "rubric": ("input", "output", "reference", "context", "rubric"),
    # reference-correctness: is the output correct given the reference?
    "reference": ("input", "output", "reference", "context"),
    # pairwise-preference: two outputs for the same input.
    "pairwise": ("input", "output_a", "output_b", "reference", "context"),
    # prompt-judge: a user's template file.
    "custom": ("input", "output", "reference", "context"),
    # the agent pack's goal-judge: a whole session against the user's goal.
    "session": ("goal", "transcript"),
    # the rag pack: claims extracted from an output, then judged one by one against the context.
    "rag": ("input", "output", "reference", "context", "claims"),
    # the safety pack's attack judges: did the output do what the attack in the input wanted?
    "attack": ("input", "output", "goal"),
}

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
SYSTEM_MARKER = "---system---"
USER_MARKER = "---user---"
_MARKER_LINE = re.compile(r"^[ \t]*(---(?:system|user)---)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Template:
    """One judge prompt. ``version`` is None for template files (their ``name`` is the path)."""

    name: str
    version: int | None
    kind: Kind
    system: str
    user: str
    source: str = ""  # where it came from, for error messages ("built-in template llm-judge@1", a file path)
    placeholders: tuple[str, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"template kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.user.strip():
            raise BadInputError(f"{self.where}: the user part is empty")
        used = find_placeholders(self.system + "\n" + self.user)
        accepted = KINDS[self.kind]
        unknown = [name for name in used if name not in accepted]
        if unknown:
            raise BadInputError(
                f"{self.where}: unknown placeholder(s) {placeholder_list(unknown)}; "
                f"accepted: {placeholder_list(accepted)}"
            )
        object.__setattr__(self, "placeholders", used)

    @property
    def ref(self) -> str:
        return self.name if self.version is None else f"{self.name}@{self.version}"

    @property
    def where(self) -> str:
        return self.source or f"template {self.ref}"

    @property
    def text(self) -> str:
        """The template's exact text, in the file format (what the hash covers)."""
        return f"{SYSTEM_MARKER}\n{self.system}\n{USER_MARKER}\n{self.user}"

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def uses(self, placeholder: str) -> bool:
        return placeholder in self.placeholders

    def render(self, values: Mapping[str, str]) -> list[dict[str, str]]:
        """The chat messages: a system message (when the template has a system part), then the user one.

        ``values`` must hold every placeholder the template uses; extra values are ignored.
        """
        missing = [name for name in self.placeholders if name not in values]
        if missing:
            raise ValueError(f"{self.where}: no value for placeholder(s) {', '.join(missing)}")
        messages = []
        system = substitute(self.system, values)
        if system.strip():
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": substitute(self.user, values)})
        return messages


def find_placeholders(text: str) -> tuple[str, ...]:
    """The distinct placeholder names in ``text``, in order of first use."""
    return tuple(dict.fromkeys(m.group(1) for m in PLACEHOLDER.finditer(text)))


def substitute(text: str, values: Mapping[str, str]) -> str:
    """Replace each ``{{name}}`` with ``values[name]`` in one pass (substituted text is not rescanned)."""
    return PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), text)


def parse_template_text(text: str, where: str) -> tuple[str, str]:
    """(system, user) from a template's text, honouring the optional ``---system---``/``---user---`` split."""
    markers = list(_MARKER_LINE.finditer(text))
    names = [m.group(1) for m in markers]
    if not markers:
        return "", text.strip("\n")
    for marker in (SYSTEM_MARKER, USER_MARKER):
        if names.count(marker) > 1:
            raise BadInputError(f"{where}: {marker} appears more than once")
    if USER_MARKER not in names:
        raise BadInputError(f"{where}: has {SYSTEM_MARKER} but no {USER_MARKER} line to start the user message")
    if names[0] != SYSTEM_MARKER and len(names) == 2:
        raise BadInputError(f"{where}: {SYSTEM_MARKER} must come before {USER_MARKER}")
    if text[: markers[0].start()].strip():
        raise BadInputError(f"{where}: text before the {names[0]} line (put everything in the two parts)")
    if len(markers) == 1:  # ---user--- only
        return "", text[markers[0].end():].strip("\n")
    return text[markers[0].end():markers[1].start()].strip("\n"), text[markers[1].end():].strip("\n")


def template_from_text(
    text: str, *, name: str, version: int | None, kind: Kind, source: str = ""
) -> Template:
    where = source or (name if version is None else f"template {name}@{version}")
    system, user = parse_template_text(text, where)
    return Template(name=name, version=version, kind=kind, system=system, user=user, source=source)


# --- built-in templates --------------------------------------------------------------------------------

# (name, version, kind); the text is in templates/<name>.v<version>.txt
_BUILTIN: tuple[tuple[str, int, Kind], ...] = (
    ("llm-judge", 1, "rubric"),
    ("reference-correctness", 1, "reference"),
    ("pairwise", 1, "pairwise"),
)

_lock = threading.Lock()
_registry: dict[str, Template] = {}


def _load_builtins() -> None:
    if _registry:
        return
    files = resources.files("evalsi.packs.judge") / "templates"
    for name, version, kind in _BUILTIN:
        text = (files / f"{name}.v{version}.txt").read_text(encoding="utf-8")
        template = template_from_text(
            text, name=name, version=version, kind=kind, source=f"built-in template {name}@{version}"
        )
        _registry.setdefault(template.ref, template)


@functools.cache
def pack_template(package: str, name: str, version: int, kind: Kind) -> Template:
    """Another pack's built-in template, read once from ``<package>/templates/<name>.v<version>.txt``; not
    registered (its evaluators name it themselves), its hash keying the judge cache like any template's."""
    text = (resources.files(package) / "templates" / f"{name}.v{version}.txt").read_text(encoding="utf-8")
    return template_from_text(text, name=name, version=version, kind=kind,
                              source=f"built-in template {name}@{version}")


def get_template(ref: str) -> Template:
    """A registered template by ``name@version``; unknown ones are a BadInputError listing the known."""
    with _lock:
        _load_builtins()
        template = _registry.get(ref.strip())
    if template is None:
        raise BadInputError(f"unknown judge template {ref!r}; known templates: {', '.join(template_refs())}")
    return template


def template_refs() -> list[str]:
    with _lock:
        _load_builtins()
        return sorted(_registry)


def builtin_template_refs() -> list[str]:
    return [f"{name}@{version}" for name, version, _ in _BUILTIN]


def register_template(template: Template) -> None:
    """Make a template selectable by ``name@version`` (e.g. through a judge's ``template`` setting).

    Re-registering the same text is a no-op; another text under a taken ``name@version`` is an error:
    published versions never change (bump the version instead).
    """
    if template.version is None:
        raise BadInputError(f"{template.where}: a registered template needs a version (name@version)")
    with _lock:
        _load_builtins()
        existing = _registry.get(template.ref)
        if existing is not None and existing.text != template.text:
            raise BadInputError(f"judge template {template.ref} is already registered with another text")
        _registry[template.ref] = template


def unregister_template(ref: str) -> None:
    """Remove a template added with ``register_template`` (built-ins stay)."""
    if ref in builtin_template_refs():
        raise BadInputError(f"judge template {ref} is built in and cannot be removed")
    with _lock:
        _registry.pop(ref, None)


def select_template(default: str, override: str | None) -> Template:
    """The evaluator's ``default`` template, or the judge's configured ``override`` when that names a
    template of the same kind (a judge shared by several evaluators sets one template for its kind)."""
    template = get_template(default)
    if not override:
        return template
    chosen = get_template(override)
    return chosen if chosen.kind == template.kind else template


# --- template files ------------------------------------------------------------------------------------

_file_cache: dict[tuple[str, int, int, str], Template] = {}


def load_template_file(path: str | os.PathLike[str], *, kind: Kind = "custom") -> Template:
    """Read and check a template file; cached until the file changes. Errors name the file."""
    resolved = Path(path).expanduser()
    where = f"template file {str(path)!r}"
    try:
        stat = resolved.stat()
    except FileNotFoundError:
        # Not where it resolved to: on a server that would tell the caller the worker's working directory.
        raise BadInputError(
            f"{where}: no such file (a relative path is relative to the evaluating process's working directory)"
        ) from None
    except OSError as exc:
        raise BadInputError(f"{where}: cannot read it: {exc}") from None
    if not resolved.is_file():
        raise BadInputError(f"{where}: not a file")
    key = (str(resolved.absolute()), stat.st_mtime_ns, stat.st_size, kind)
    with _lock:
        cached = _file_cache.get(key)
    if cached is not None:
        return cached
    try:
        text = resolved.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{where}: not UTF-8 text ({exc})") from None
    except OSError as exc:
        raise BadInputError(f"{where}: cannot read it: {exc}") from None
    template = template_from_text(text, name=str(path), version=None, kind=kind, source=where)
    with _lock:
        _file_cache[key] = template
    return template


def placeholder_list(names: Iterable[str]) -> str:
    return ", ".join("{{" + n + "}}" for n in names)
