"""The isolation ladder (§13, D6): probe each rung functionally, use the strongest usable one, fail closed.

A rung is a driver registered below by name. Each is probed once, the first time the ladder reaches it, by running
its real profile against ``true`` (an installed binary is no proof that it works); the verdict is kept for the
life of the ``Ladder`` (one per process: the CLI's, sandboxd's). ``select`` walks the ladder strongest first and
takes the first available rung whose level meets the request's minimum; when none does it raises
``SandboxUnavailable`` and nothing runs. There is no unconfined fallback.

A stronger rung passed over because it is unavailable (its probe failed: no KVM, a root bwrap cannot reach, ...) is
never passed over silently: the ladder logs why (a warning the first time for each rung, then at debug level, as its
verdict is cached), and the session's isolation report says so under the ``skipped`` bound, so a record's
provenance shows that its request ran below a rung the operator configured, and why (``OPTIONAL_BY_DEFAULT``: the
default ladder's Firecracker, absent from most hosts, only at debug level).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import cast

from evalsi.errors import BadInputError
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.image_build import BuildDriver, built_spec, seed_workspace
from evalsi.sandbox.model import Level, ProbeVerdict, SandboxDriver, SandboxSession, SandboxSpec, SandboxUnavailable

__all__ = ["DEFAULT_LADDER", "DRIVERS", "DriverFactory", "Ladder", "check_ladder", "describe_skipped", "load_driver"]

log = logging.getLogger("evalsi.sandbox.ladder")

# Every rung Evals.si ships: name -> "module:attribute" of a factory ``(SandboxConfig) -> SandboxDriver`` (a driver
# class). Listed strongest first, the order `evalsi sandbox probe` shows them in. Modules load on first use, so a
# rung's heavy imports cost nothing to a ladder that never reaches it. One line per driver.
DRIVERS: Mapping[str, str] = MappingProxyType({
    "firecracker": "evalsi.sandbox.vm.firecracker:FirecrackerDriver",
    "qemu": "evalsi.sandbox.vm.driver:VmDriver",
    "gvisor": "evalsi.sandbox.gvisor:GvisorDriver",
    "bwrap": "evalsi.sandbox.bwrap:BwrapDriver",
    "landlock": "evalsi.sandbox.landlock:LandlockDriver",
})

# The standalone ladder D6 decided: Firecracker where /dev/kvm is usable, then bubblewrap, then Landlock; names not
# registered yet are left out of the default.
DEFAULT_LADDER: tuple[str, ...] = ("firecracker", "bwrap", "landlock")
# Stronger but slower rungs (QEMU under TCG runs guest code ~13x slower; gVisor on ptrace pays per syscall): without
# a configured ladder they are reached only when a request's minimum is above every usable rung of DEFAULT_LADDER,
# so `--min-isolation vm` is honored where no Firecracker is, and everything else keeps the fast rungs. Cheapest
# first: a `kernel` minimum gets gVisor, not a VM booted under emulation.
ON_DEMAND: tuple[str, ...] = ("gvisor", "qemu")
# Rungs of DEFAULT_LADDER used only where the host has them: Firecracker needs /dev/kvm with hardware virtualization,
# which most hosts (containers, CI, this machine) lack, so passing it over is the expected case, not a fallback worth
# a warning on every run; logged at debug level and left out of the report. Named in a configured or requested
# ladder, it is reported like any other rung.
OPTIONAL_BY_DEFAULT: frozenset[str] = frozenset({"firecracker"})

DriverFactory = Callable[[SandboxConfig], SandboxDriver]


def check_ladder(names: tuple[str, ...], where: str) -> tuple[str, ...]:
    """``names`` when every one is a registered driver; else a ``BadInputError`` naming ``where`` and the choices."""
    if not names:
        raise BadInputError(f"{where}: the ladder is empty; accepted: {', '.join(DRIVERS)}")
    for name in names:
        if name not in DRIVERS:
            raise BadInputError(f"{where}: {name!r} is not a sandbox driver; accepted: {', '.join(DRIVERS)}")
    return names


def describe_skipped(skipped: tuple[ProbeVerdict, ...]) -> str:
    """The ``skipped`` bound of an isolation report: each stronger rung passed over, its level and why."""
    return "; ".join(f"{verdict.driver} ({verdict.level.label}): {verdict.reason or 'unavailable'}"
                     for verdict in skipped)


def load_driver(name: str, config: SandboxConfig) -> SandboxDriver:
    """The driver registered as ``name``, built from ``config``."""
    module_name, _, attribute = DRIVERS[name].partition(":")
    factory = cast(DriverFactory, getattr(importlib.import_module(module_name), attribute))
    return factory(config)


class Ladder:
    """The configured rungs, their cached verdicts, and the choice of a rung for a request."""

    def __init__(self, config: SandboxConfig | None = None, *,
                 drivers: Mapping[str, SandboxDriver] | None = None) -> None:
        self.config = config or SandboxConfig()
        # Drivers given here (tests, sandboxd's own instances) take the place of the registered ones by name.
        self._drivers: dict[str, SandboxDriver] = dict(drivers or {})
        self._verdicts: dict[str, ProbeVerdict] = {}
        self._probing: dict[str, asyncio.Task[ProbeVerdict]] = {}
        self._warned: set[str] = set()  # rungs whose skipping was logged as a warning once already
        configured = self.config.ladder
        self.on_demand: tuple[str, ...] = ()
        if configured is None:
            self.names = tuple(name for name in DEFAULT_LADDER if name in DRIVERS or name in self._drivers)
            self.on_demand = tuple(name for name in ON_DEMAND if name in DRIVERS or name in self._drivers)
        else:
            self.names = self._request_ladder(configured, "sandbox.ladder")

    def driver(self, name: str) -> SandboxDriver:
        if name not in self._drivers:
            self._drivers[name] = load_driver(name, self.config)
        return self._drivers[name]

    async def probe(self, name: str) -> ProbeVerdict:
        """The rung's verdict, probed on first use and cached; a driver that fails to load or to probe is
        unavailable with the reason, never an exception the caller has to tell from a denial."""
        if name in self._verdicts:
            return self._verdicts[name]
        task = self._probing.get(name)
        if task is None:
            task = asyncio.ensure_future(self._probe_once(name))
            self._probing[name] = task
        try:
            verdict = await asyncio.shield(task)
        finally:
            if task.done():
                self._probing.pop(name, None)
        self._verdicts[name] = verdict
        return verdict

    async def _probe_once(self, name: str) -> ProbeVerdict:
        try:
            driver = self.driver(name)
        except Exception as exc:  # an import or config error of one rung must not take the ladder down
            return ProbeVerdict(name, Level.NONE, False, reason=f"driver failed to load: {_describe(exc)}")
        try:
            return await driver.probe()
        except Exception as exc:
            return ProbeVerdict(name, driver.level, False, reason=f"probe failed: {_describe(exc)}")

    async def probe_all(self, names: tuple[str, ...] | None = None) -> tuple[ProbeVerdict, ...]:
        """Every rung's verdict (the configured ladder and its on-demand rungs by default), in ladder order."""
        chosen = (*self.names, *self.on_demand) if names is None else names
        return tuple(await asyncio.gather(*(self.probe(name) for name in chosen)))

    def forget(self, name: str) -> None:
        """Drop a cached verdict, so the next use probes again (e.g. after the operator fixed the rung)."""
        self._verdicts.pop(name, None)

    async def select(self, minimum: Level, ladder: tuple[str, ...] | None = None) -> tuple[SandboxDriver,
                                                                                           ProbeVerdict]:
        """The first available rung, strongest first, whose level meets ``minimum``, then (default ladder only) the
        first such on-demand rung; else ``SandboxUnavailable``. Rungs past the chosen one are not probed."""
        driver, verdict, _ = await self._choose(minimum, ladder)
        return driver, verdict

    async def create(self, spec: SandboxSpec) -> SandboxSession:
        """A session on the rung ``select`` picks for ``spec`` (its ladder, else the configured one), whose
        isolation report names the stronger rungs skipped as unavailable. A Dockerfile root is built first (or found
        in the cache), its RUN steps on the bwrap rung, and the workspace starts with what its WORKDIR holds."""
        image = None
        if spec.root.kind == "dockerfile":
            spec, image = await built_spec(spec, self.config, cast(BuildDriver, self.driver("bwrap")))
        driver, _, skipped = await self._choose(spec.min_isolation, spec.ladder)
        session = await driver.create(spec)
        if image is not None:
            try:
                await seed_workspace(session, image, spec.workdir)
            except BaseException:
                await session.destroy()
                raise
        if skipped:
            report = session.isolation
            session.isolation = replace(report, bounds={**report.bounds, "skipped": describe_skipped(skipped)})
        return session

    async def _choose(self, minimum: Level, ladder: tuple[str, ...] | None
                      ) -> tuple[SandboxDriver, ProbeVerdict, tuple[ProbeVerdict, ...]]:
        names = (*self.names, *self.on_demand) if ladder is None else self._request_ladder(ladder, "ladder")
        optional = OPTIONAL_BY_DEFAULT if ladder is None and self.config.ladder is None else frozenset()
        tried: list[ProbeVerdict] = []
        for name in names:
            verdict = await self.probe(name)
            tried.append(verdict)
            if verdict.available and verdict.level >= minimum:
                # The rungs preferred to this one (listed before it) that could not run anything here.
                passed_over = tuple(other for other in tried[:-1] if not other.available)
                self._log_skipped(passed_over, verdict, minimum, optional)
                return self.driver(name), verdict, tuple(other for other in passed_over
                                                         if other.driver not in optional)
        raise SandboxUnavailable(minimum, tuple(tried))

    def _log_skipped(self, skipped: tuple[ProbeVerdict, ...], chosen: ProbeVerdict, minimum: Level,
                     optional: frozenset[str]) -> None:
        for verdict in skipped:
            quiet = verdict.driver in self._warned or verdict.driver in optional
            level = logging.DEBUG if quiet else logging.WARNING
            self._warned.add(verdict.driver)
            log.log(level, "sandbox rung %s (%s) skipped, unavailable: %s; running on %s (%s) for a request with "
                    "min_isolation %s", verdict.driver, verdict.level.label, verdict.reason or "no reason given",
                    chosen.driver, chosen.level.label, minimum.label)

    def _request_ladder(self, ladder: tuple[str, ...], where: str) -> tuple[str, ...]:
        accepted = ", ".join(dict.fromkeys((*DRIVERS, *self._drivers)))
        if not ladder:
            raise BadInputError(f"{where}: the ladder is empty; accepted: {accepted}")
        for name in ladder:
            if name not in DRIVERS and name not in self._drivers:
                raise BadInputError(f"{where}: {name!r} is not a sandbox driver; accepted: {accepted}")
        return ladder


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__
