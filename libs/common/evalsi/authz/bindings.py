"""Bindings: which principals hold which role in which project.

Subjects (§17): ``user:<provider>/<subject>``, ``email:<address>`` (only when the provider asserts
``email_verified``), ``group:<provider>/<group>``, ``key:<name>`` (an API key) and ``cel:<expression>`` (anything
else, e.g. a GitHub Actions token's repository and ref). A binding in project ``*`` holds in every project;
``rbac.owners`` binds the install-wide ``owner`` role.

Bindings are indexed by subject once, so finding a principal's roles costs a few dictionary lookups plus one
evaluation per ``cel:`` subject.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from evalsi.auth.principal import ANY_PROJECT, Principal
from evalsi.authz.expressions import Activation, Expression
from evalsi.authz.roles import OWNER, RoleSet
from evalsi.errors import BadInputError
from evalsi.projects import PROJECT_RULE, is_project

SubjectKind = Literal["user", "email", "group", "key", "cel"]
_KINDS: dict[str, SubjectKind] = {"user": "user", "email": "email", "group": "group", "key": "key", "cel": "cel"}
SUBJECT_FORMS = "user:<provider>/<subject>, email:<address>, group:<provider>/<group>, key:<name> or cel:<expression>"


@dataclass(frozen=True)
class Subject:
    kind: SubjectKind
    value: str
    text: str
    expression: Expression | None = None


@dataclass(frozen=True)
class BindingDefinition:
    """A binding as written: ``rbac.projects.<project>.<role>[i]`` (``origin``) or a stored row (``id``)."""

    project: str
    role: str
    subject: str
    origin: str = ""
    id: str = ""

    @property
    def where(self) -> str:
        return self.origin or f"binding {self.id or self.subject!r} of role {self.role!r} in {self.project!r}"


@dataclass(frozen=True)
class Binding:
    project: str
    role: str
    subject: Subject
    origin: str

    def describe(self) -> str:
        scope = "every project" if self.project == ANY_PROJECT else f"project {self.project}"
        return f"role {self.role} from binding {self.subject.text} in {scope} ({self.origin})"


def parse_subject(text: str, where: str) -> Subject:
    kind, sep, value = text.partition(":")
    value = value.strip()
    if not sep or not value or kind not in _KINDS:
        raise BadInputError(f"{where}: {text!r} is not a subject; write {SUBJECT_FORMS}")
    if kind in ("user", "group"):
        provider, slash, name = value.partition("/")
        if not slash or not provider or not name:
            raise BadInputError(f"{where}: {text!r} names no provider; write {kind}:<provider>/<name>")
    if kind == "email":
        if "@" not in value:
            raise BadInputError(f"{where}: {text!r} is not an email address")
        value = value.lower()
    if kind == "cel":
        return Subject("cel", value, text, Expression(value, where, "a cel: subject"))
    return Subject(_KINDS[kind], value, text)


def build_binding(definition: BindingDefinition, roles: RoleSet) -> Binding:
    """A checked binding: a valid project (or ``*``), a role defined for that project, a well-formed subject."""
    where = definition.where
    if definition.project != ANY_PROJECT and not is_project(definition.project):
        raise BadInputError(f"{where}: {definition.project!r} is not a project ({PROJECT_RULE}) nor * (every "
                            f"project)")
    if definition.role == OWNER and definition.project != ANY_PROJECT:
        raise BadInputError(f"{where}: owner is install-wide; list owners under rbac.owners")
    role = roles.find(definition.role, definition.project if definition.project != ANY_PROJECT else "")
    if role is None:
        known = ", ".join(roles.names(definition.project if definition.project != ANY_PROJECT else ""))
        raise BadInputError(f"{where}: unknown role {definition.role!r}; roles: {known}")
    return Binding(definition.project, definition.role, parse_subject(definition.subject, where), where)


@dataclass
class BindingIndex:
    """Bindings by subject, for finding the ones that name a principal."""

    _exact: dict[tuple[str, str], list[Binding]] = field(default_factory=dict)
    _cel: list[tuple[Binding, Expression]] = field(default_factory=list)
    all: list[Binding] = field(default_factory=list)

    @classmethod
    def of(cls, bindings: Iterable[Binding]) -> BindingIndex:
        index = cls()
        for binding in bindings:
            index.all.append(binding)
            if binding.subject.expression is not None:
                index._cel.append((binding, binding.subject.expression))
            else:
                index._exact.setdefault((binding.subject.kind, binding.subject.value), []).append(binding)
        return index

    def exact(self, principal: Principal) -> list[Binding]:
        """Bindings whose subject names the principal directly (user, email, group, key)."""
        found: list[Binding] = []
        for key in _subject_keys(principal):
            found.extend(self._exact.get(key, ()))
        return found

    def cel(self, activation: Activation) -> list[tuple[Binding, bool | Exception]]:
        """Each ``cel:`` binding with its result."""
        return [(binding, expression.holds(activation)) for binding, expression in self._cel]

    @property
    def has_cel(self) -> bool:
        return bool(self._cel)


def _subject_keys(principal: Principal) -> list[tuple[str, str]]:
    if not principal.authenticated:
        return []
    keys = [("user", f"{principal.provider}/{principal.subject}")]
    if principal.email and principal.email_verified:
        keys.append(("email", principal.email.lower()))
    keys.extend(("group", f"{principal.provider}/{group}") for group in principal.groups)
    if principal.kind == "apikey" and principal.key_name:
        keys.append(("key", principal.key_name))
    return keys
