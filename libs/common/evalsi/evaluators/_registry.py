"""Packs and the registry that resolves evaluator references (``ns/name[@version]`` or a bare name)."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Final

from evalsi.errors import BadInputError
from evalsi.evaluators._evaluator import Evaluator
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorManifest

ENTRY_POINT_GROUP = "evalsi.packs"
# The distribution whose packs may call themselves native or wrapped (docs/packs.md, "Tiers").
OWN_DISTRIBUTION: Final = "evalsi"
# Adapter maturity (plan §8): native, we own the code and its tests; wrapped, a thin shim over a pinned upstream
# package; community, published by a third party.
TIERS: Final = ("native", "wrapped", "community")
_UPSTREAM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}==[A-Za-z0-9][A-Za-z0-9.+!_-]{0,49}")


@dataclass(frozen=True)
class Pack:
    """A named set of evaluators, registered through the ``evalsi.packs`` entry-point group.

    ``tier`` is one of ``TIERS``; a wrapped pack names the upstream release it shims in ``upstream``
    (``ragas==0.2.15``), which the catalog shows.
    """

    name: str
    evaluators: tuple[Evaluator, ...]
    description: str = ""
    default_on: bool = False
    tier: str = "native"
    upstream: str = ""

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise BadInputError(f"pack {self.name!r}: tier {self.tier!r} is not one of {', '.join(TIERS)}")
        if self.upstream and not _UPSTREAM.fullmatch(self.upstream):
            raise BadInputError(
                f"pack {self.name!r}: upstream {self.upstream!r} must pin one release as name==version "
                "(e.g. ragas==0.2.15)"
            )
        if self.tier == "wrapped" and not self.upstream:
            raise BadInputError(
                f"pack {self.name!r}: a wrapped pack pins its upstream package (upstream=name==version)"
            )


def _version_key(version: str) -> tuple[int, ...]:
    core = version.split("-")[0].split("+")[0]
    return tuple(int(part) for part in core.split("."))


class Registry:
    """Evaluators by name and version. Built once (usually from entry points) and passed explicitly."""

    def __init__(self, packs: Iterable[Pack] = ()) -> None:
        self._packs: dict[str, Pack] = {}
        self._by_name: dict[str, dict[str, Evaluator]] = {}
        # Refs resolved before, by their stripped spelling: the api resolves every Evaluate's refs a few times,
        # and a bare name scans every name. Only refs that resolved are kept (a few spellings per evaluator).
        self._resolved: dict[str, Evaluator] = {}
        for pack in packs:
            self.add_pack(pack)

    @classmethod
    def from_entry_points(cls, group: str = ENTRY_POINT_GROUP) -> Registry:
        """Load every pack installed under the entry-point group; a bad plugin fails naming both."""
        registry = cls()
        for entry_point in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
            try:
                pack = entry_point.load()
            except Exception as exc:
                raise BadInputError(
                    f"entry point {entry_point.name!r} in group {group!r} ({entry_point.value}) failed to load: {exc}"
                ) from exc
            if not isinstance(pack, Pack):
                raise BadInputError(
                    f"entry point {entry_point.name!r} in group {group!r} ({entry_point.value}) is a "
                    f"{type(pack).__name__}, expected evalsi.Pack"
                )
            registry.add_pack(_tier_by_origin(pack, entry_point.dist.name if entry_point.dist else ""))
        return registry

    def add_pack(self, pack: Pack) -> None:
        if pack.name in self._packs:
            raise BadInputError(f"pack {pack.name!r} is registered twice")
        self._packs[pack.name] = pack
        for ev in pack.evaluators:
            self.add(ev if ev.pack else _with_pack(ev, pack.name))

    def add(self, ev: Evaluator) -> None:
        versions = self._by_name.setdefault(ev.name, {})
        if ev.version in versions and versions[ev.version] is not ev:
            raise BadInputError(f"evaluator {ev.ref} is registered twice")
        versions[ev.version] = ev
        self._resolved.clear()  # a new version or a second namespace changes what a ref names

    @property
    def packs(self) -> dict[str, Pack]:
        return dict(self._packs)

    def evaluators(self, pack: str | None = None) -> list[Evaluator]:
        """The newest version of each evaluator, optionally of one pack, sorted by name."""
        if pack is not None and pack not in self._packs:
            raise BadInputError(f"unknown pack {pack!r}; installed packs: {', '.join(sorted(self._packs))}")
        latest = [max(v.values(), key=lambda e: _version_key(e.version)) for v in self._by_name.values()]
        return sorted((e for e in latest if pack is None or e.pack == pack), key=lambda e: e.name)

    def manifest(self, ev: Evaluator) -> EvaluatorManifest:
        """``ev``'s manifest with the tier of the pack it is registered in: the pack, not the evaluator, knows
        where it came from."""
        manifest = ev.manifest()
        pack = self._packs.get(ev.pack)
        if pack is not None:
            manifest.tier = pack.tier
        return manifest

    def resolve(self, ref: str) -> Evaluator:
        """``ns/name@version``, ``ns/name`` (newest version) or an unambiguous bare ``name``."""
        ref = ref.strip()
        known = self._resolved.get(ref)
        if known is None:
            known = self._resolved[ref] = self._resolve(ref)
        return known

    def _resolve(self, ref: str) -> Evaluator:
        name, _, version = ref.partition("@")
        if "/" not in name:
            matches = sorted(full for full in self._by_name if full.split("/", 1)[1] == name)
            if len(matches) > 1:
                raise BadInputError(f"evaluator {name!r} is ambiguous: {', '.join(matches)}; use the full name")
            if not matches:
                raise BadInputError(self._unknown(name))
            name = matches[0]
        versions = self._by_name.get(name)
        if versions is None:
            raise BadInputError(self._unknown(name))
        if version:
            if version not in versions:
                known = ", ".join(sorted(versions, key=_version_key))
                raise BadInputError(f"evaluator {name} has no version {version}; installed: {known}")
            return versions[version]
        return max(versions.values(), key=lambda e: _version_key(e.version))

    def _unknown(self, name: str) -> str:
        # One suggestion per evaluator, spelled as the name was given: a bare name suggests bare names (the full
        # name where two namespaces share one), a full name full names; never one evaluator under both spellings.
        candidates: Sequence[str] = list(self._by_name)
        if "/" not in name:
            shorts = Counter(full.split("/", 1)[1] for full in self._by_name)
            candidates = [
                full.split("/", 1)[1] if shorts[full.split("/", 1)[1]] == 1 else full for full in self._by_name
            ]
        close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else "; `evalsi catalog list` shows what is installed"
        return f"unknown evaluator {name!r}{hint}"


def _with_pack(ev: Evaluator, pack: str) -> Evaluator:
    return replace(ev, pack=pack)


def _tier_by_origin(pack: Pack, distribution: str) -> Pack:
    """A pack another distribution installs is community whatever it declares: native and wrapped say that
    Evals.si maintains and tests the code, which only its own distribution can say."""
    if pack.tier == "community" or distribution.lower().replace("_", "-") == OWN_DISTRIBUTION:
        return pack
    return replace(pack, tier="community")
