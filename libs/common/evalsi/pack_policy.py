"""Which evaluator packs a project uses on a server: evalsi.yaml's ``evaluators:`` section (docs/packs.md).

    evaluators:
      packs: [core, judge]                    # enabled in every project that names none (absent: the default-on
                                              # packs, core)
      allowed_packs: [core, judge, rag]       # the admin allowlist (absent: every installed pack)
      projects:
        support: {packs: [core, judge, rag], allowed_packs: [core, judge, rag, safety]}

A project's own ``packs`` or ``allowed_packs`` replaces the install-wide one. *Allowed* packs are the only ones a
served request (Evaluate, CreateRun, ApplyPolicy) may name an evaluator of; naming one is the opt-in, so Evaluate
and CreateRun need no more. *Enabled* packs are what the project's online policies may run and what its catalog
lists. Embedded mode (``evaluate()``, ``evalsi eval``) reads none of this: there, naming is the opt-in.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from evalsi.errors import BadInputError
from evalsi.projects import check_project

SETTING: Final = "evaluators"
KEYS: Final = ("packs", "allowed_packs", "projects")
PROJECT_KEYS: Final = ("packs", "allowed_packs")
# Bounds of the section: a pack list names installed packs (a few dozen at most), projects are configured by hand.
MAX_PACKS: Final = 128
MAX_PROJECTS: Final = 10_000
MAX_PACK_CHARS: Final = 64


@dataclass(frozen=True)
class ProjectPacks:
    """One project's override; None inherits the install-wide setting."""

    packs: tuple[str, ...] | None = None
    allowed_packs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PackPolicy:
    """The ``evaluators:`` section, checked. The empty policy is the default: the default-on packs enabled, every
    installed pack allowed."""

    packs: tuple[str, ...] | None = None
    allowed_packs: tuple[str, ...] | None = None
    # Left out of the hash (dicts have none), so a Connections holding it stays hashable.
    projects: Mapping[str, ProjectPacks] = field(default_factory=dict, hash=False)

    def allowed(self, project: str, installed: Collection[str]) -> frozenset[str]:
        """The packs ``project``'s requests may name evaluators of."""
        override = self.projects.get(project, ProjectPacks())
        chosen = override.allowed_packs if override.allowed_packs is not None else self.allowed_packs
        return frozenset(installed if chosen is None else chosen) & frozenset(installed)

    def enabled(self, project: str, installed: Mapping[str, bool]) -> frozenset[str]:
        """The packs on for ``project`` (``installed``: each installed pack's ``default_on``), inside its
        allowlist: an install-wide ``packs`` never enables what a project's allowlist leaves out."""
        override = self.projects.get(project, ProjectPacks())
        chosen = override.packs if override.packs is not None else self.packs
        if chosen is None:
            chosen = tuple(name for name, on in installed.items() if on)
        return frozenset(chosen) & self.allowed(project, installed)

    def not_enabled(self, project: str, packs: Iterable[str], installed: Mapping[str, bool]) -> list[str]:
        """Those of ``packs`` (in order, once each) an online policy of ``project`` may not run."""
        enabled = self.enabled(project, installed)
        return [name for name in dict.fromkeys(packs) if name not in enabled]

    def with_stored(self, stored: Iterable[tuple[str, tuple[str, ...] | None, tuple[str, ...] | None]]) -> PackPolicy:
        """This policy with the lists stored through the API, ``(project, packs, allowed_packs)``, over the
        project's own in evalsi.yaml; a list not stored (None) keeps evalsi.yaml's."""
        projects = dict(self.projects)
        for project, packs, allowed in stored:
            base = projects.get(project, ProjectPacks())
            projects[project] = ProjectPacks(base.packs if packs is None else packs,
                                             base.allowed_packs if allowed is None else allowed)
        return replace(self, projects=projects)

    def unknown_packs(self, installed: Collection[str], where: str = "evalsi.yaml") -> list[str]:
        """Each pack the section names that is not installed, naming its key: checked where a registry is."""
        problems = []
        for key, names in self._lists():
            for name in names:
                if name not in installed:
                    close = difflib.get_close_matches(name, sorted(installed), n=1)
                    hint = f"did you mean {close[0]}?" if close else f"installed: {', '.join(sorted(installed))}"
                    problems.append(f"{where}: {SETTING}.{key}: {name!r} is not an installed pack; {hint}")
        return problems

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {}
        if self.packs is not None:
            document["packs"] = list(self.packs)
        if self.allowed_packs is not None:
            document["allowed_packs"] = list(self.allowed_packs)
        if self.projects:
            document["projects"] = {
                name: {key: list(value) for key in PROJECT_KEYS if (value := getattr(packs, key)) is not None}
                for name, packs in self.projects.items()
            }
        return document

    def _lists(self) -> Iterable[tuple[str, tuple[str, ...]]]:
        for key in PROJECT_KEYS:
            if (value := getattr(self, key)) is not None:
                yield key, value
        for name, packs in self.projects.items():
            for key in PROJECT_KEYS:
                if (value := getattr(packs, key)) is not None:
                    yield f"projects.{name}.{key}", value


def load_pack_policy(section: Any, where: str = "evalsi.yaml") -> PackPolicy:
    """The ``evaluators:`` section, each mistake naming its key and what is accepted."""
    if section is None:
        return PackPolicy()
    path = f"{where}: {SETTING}"
    _mapping(section, KEYS, path)
    projects = section.get("projects") or {}
    _mapping(projects, None, f"{path}.projects")
    if len(projects) > MAX_PROJECTS:
        raise BadInputError(f"{path}.projects: {len(projects)} projects exceed the limit of {MAX_PROJECTS}")
    overrides = {}
    for name, value in projects.items():
        project = check_project(str(name), f"{path}.projects")
        _mapping(value, PROJECT_KEYS, f"{path}.projects.{project}")
        overrides[project] = ProjectPacks(*(_packs(value, key, f"{path}.projects.{project}") for key in PROJECT_KEYS))
        _within(overrides[project], f"{path}.projects.{project}")
    policy = PackPolicy(_packs(section, "packs", path), _packs(section, "allowed_packs", path), overrides)
    _within(ProjectPacks(policy.packs, policy.allowed_packs), path)
    return policy


def _mapping(value: Any, keys: tuple[str, ...] | None, where: str) -> None:
    if not isinstance(value, Mapping):
        shape = "{" + ", ".join(f"{k}: [...]" for k in keys) + "}" if keys else "{<project>: {packs: [...]}}"
        raise BadInputError(f"{where}: expected a mapping like {shape}")
    if keys is None:
        return
    for key in value:
        if key not in keys:
            close = difflib.get_close_matches(str(key), keys, n=1)
            hint = f"did you mean {close[0]}?" if close else f"accepted: {', '.join(keys)}"
            raise BadInputError(f"{where}: {key}: unknown key; {hint}")


def _packs(section: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    if key not in section or section[key] is None:
        return None
    value = section[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and 0 < len(v) <= MAX_PACK_CHARS for v in value):
        raise BadInputError(f"{where}.{key}: expected a list of pack names like [core, judge], got {value!r}")
    if len(value) > MAX_PACKS:
        raise BadInputError(f"{where}.{key}: {len(value)} packs exceed the limit of {MAX_PACKS}")
    return tuple(dict.fromkeys(value))


def _within(packs: ProjectPacks, where: str) -> None:
    """A project's own packs outside its own allowlist is a contradiction the admin should hear about at start."""
    if packs.packs is None or packs.allowed_packs is None:
        return
    outside = [name for name in packs.packs if name not in packs.allowed_packs]
    if outside:
        raise BadInputError(f"{where}.packs: {', '.join(outside)} not in allowed_packs "
                            f"({', '.join(packs.allowed_packs) or 'none'}); allow them or leave them out")
