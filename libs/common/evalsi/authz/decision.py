"""What the authorizer is asked and what it answers: the contract between ``evalsi.authz`` and the gate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evalsi.auth.principal import Principal


@dataclass(frozen=True)
class AccessRequest:
    """One action by one principal on one project's resource.

    ``resource`` holds the action table's attributes for CEL (``resource.target.model``,
    ``resource.run.created_by``, ``resource.labels`` ...); ``project`` is also ``resource.project``.
    ``method``, ``protocol``, ``headers`` (credentials removed) and ``source`` fill CEL's ``request`` and
    ``source`` variables.
    """

    principal: Principal
    action: str
    project: str
    resource: Mapping[str, Any] = field(default_factory=dict)
    method: str = ""
    protocol: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    # The gate's first decision on an action whose resource the handler completes from the store (the action
    # table's ``needs_stored_resource``: a run's created_by and labels): what only those attributes can decide does
    # not deny yet; the handler's decision on the stored resource is the final one.
    partial: bool = False


@dataclass(frozen=True)
class Decision:
    """Allowed or not, and what decided: ``deciding`` names the rule, role binding or default behind it
    (``deny rule 2: <expr>``, ``role editor from binding group:corp/eng in project support``,
    ``default deny``), as the audit log and ``evalsi auth check`` print it."""

    allowed: bool
    deciding: str
    # Every rule and role considered, in order, with its result: the trace `auth check` prints.
    trace: tuple[str, ...] = ()
    # A refusal nothing may overturn (a deny rule matched, a require rule did not hold, an unknown action): an
    # external authorizer in mode decide is final only after these (evalsi.authz.external).
    final: bool = False
