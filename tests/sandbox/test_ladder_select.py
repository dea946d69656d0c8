"""The ladder with real rungs: the strongest usable rung meeting the minimum, verdicts cached, fail closed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.bwrap import BwrapDriver
from evalsi.sandbox.config import SandboxConfig, load_sandbox_config
from evalsi.sandbox.ladder import DRIVERS, Ladder
from evalsi.sandbox.model import Level, SandboxSpec, SandboxUnavailable


def _config(tmp_path: Path, **raw: object) -> SandboxConfig:
    return load_sandbox_config({"cache_dir": str(tmp_path / "cache"), **raw})


async def test_the_first_usable_rung_meeting_the_minimum_runs_the_command(tmp_path: Path) -> None:
    ladder = Ladder(_config(tmp_path, ladder=["bwrap"]))
    session = await ladder.create(SandboxSpec(min_isolation=Level.NAMESPACED))
    try:
        result = await session.exec(["sh", "-c", "echo ran"])
    finally:
        await session.destroy()
    assert result.stdout == b"ran\n" and result.isolation.driver == "bwrap"
    assert result.isolation.level >= Level.NAMESPACED


async def test_a_minimum_above_every_rung_is_sandbox_unavailable_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ladder = Ladder(_config(tmp_path, ladder=["bwrap"]))
    with pytest.raises(SandboxUnavailable) as raised:
        await ladder.create(SandboxSpec(min_isolation=Level.VM))
    assert raised.value.code == "SANDBOX_UNAVAILABLE" and raised.value.requested is Level.VM
    assert [verdict.driver for verdict in raised.value.verdicts] == ["bwrap"]
    assert "below vm" in str(raised.value)
    assert not marker.exists()


async def test_a_broken_rung_is_skipped_and_the_ladder_fails_closed_without_another(tmp_path: Path) -> None:
    broken = _config(tmp_path, ladder=["bwrap"], drivers={"bwrap": {"binary": str(tmp_path / "no-bwrap")}})
    with pytest.raises(SandboxUnavailable) as raised:
        await Ladder(broken).select(Level.NAMESPACED)
    (verdict,) = raised.value.verdicts
    assert not verdict.available and "no-bwrap" in verdict.reason


async def test_verdicts_are_probed_once_per_ladder(tmp_path: Path) -> None:
    driver = BwrapDriver(_config(tmp_path))
    probes: list[int] = []
    real_probe = driver.probe

    async def counted() -> object:
        probes.append(1)
        return await real_probe()

    driver.probe = counted  # type: ignore[method-assign]
    ladder = Ladder(_config(tmp_path, ladder=["bwrap"]), drivers={"bwrap": driver})
    first = await ladder.probe("bwrap")
    await ladder.select(Level.NAMESPACED)
    await ladder.probe_all()
    assert first.available and probes == [1]
    ladder.forget("bwrap")
    await ladder.probe("bwrap")
    assert probes == [1, 1]


def test_the_default_ladder_is_registered_drivers_in_d6_order() -> None:
    names = Ladder(SandboxConfig()).names
    assert names and all(name in DRIVERS for name in names)
    assert "bwrap" in names
    if "landlock" in names:
        assert names.index("bwrap") < names.index("landlock")


def test_an_unknown_driver_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"sandbox.ladder: 'dockerx' is not a sandbox driver; accepted: .*bwrap"):
        Ladder(_config(tmp_path, ladder=["bwrap", "dockerx"]))


async def test_a_requests_unknown_driver_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="ladder: 'nope'"):
        await Ladder(_config(tmp_path)).select(Level.CONFINED, ("nope",))


@pytest.mark.parametrize(("raw", "message"), [
    ({"ladder": []}, "sandbox.ladder: expected a non-empty list"),
    ({"ladder": ["bwrap", "bwrap"]}, r"sandbox.ladder\[1\]: 'bwrap' appears twice"),
    ({"min_isolation": "strong"}, "sandbox.min_isolation: 'strong' is not an isolation level; accepted: vm"),
    ({"resources": {"memory": 10}}, "sandbox.resources.memory: 10 is out of range"),
    ({"resources": {"timeout": "forever"}}, "sandbox.resources.timeout: expected a duration"),
    ({"resources": {"cpus": 2}}, "sandbox.resources.cpus: unknown key"),
    ({"cgroup": "mine"}, "sandbox.cgroup: 'mine'; accepted: auto, none"),
    ({"root": "/nonexistent/image"}, "sandbox.root: '/nonexistent/image' is neither"),
    ({"ladders": ["bwrap"]}, "sandbox.ladders: unknown key"),
])
def test_bad_sandbox_sections_name_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        load_sandbox_config(raw)


def test_a_good_section_sets_every_default(tmp_path: Path) -> None:
    config = load_sandbox_config({"ladder": "bwrap,landlock", "min_isolation": "confined", "cgroup": "none",
                                  "root": str(tmp_path), "cache_dir": str(tmp_path / "c"),
                                  "resources": {"timeout": "90s", "memory": 1 << 28, "pids": 64,
                                                "output_bytes": 1000, "cpu_seconds": 5}})
    assert config.ladder == ("bwrap", "landlock") and config.min_isolation is Level.CONFINED
    assert config.root.kind == "image" and config.cgroup == "none"
    assert (config.resources.timeout_s, config.resources.memory_bytes, config.resources.pids) == (90.0, 1 << 28, 64)
    assert (config.resources.output_bytes, config.resources.cpu_seconds) == (1000, 5)


async def test_the_default_ladder_reaches_its_on_demand_rungs_only_for_a_minimum_above_it(tmp_path: Path) -> None:
    ladder = Ladder(_config(tmp_path))
    assert ladder.on_demand == ("gvisor", "qemu")
    driver, verdict = await ladder.select(Level.NAMESPACED)
    assert verdict.driver == "bwrap" and driver.name == "bwrap"
    assert "gvisor" not in ladder._verdicts and "qemu" not in ladder._verdicts  # never probed: no cost
    driver, verdict = await ladder.select(Level.KERNEL)  # above bwrap: the cheapest on-demand rung meeting it
    assert verdict.driver == "gvisor" and verdict.level is Level.KERNEL
    assert "qemu" not in ladder._verdicts
    configured = Ladder(_config(tmp_path, ladder=["bwrap", "landlock"]))
    assert configured.on_demand == ()  # a configured ladder is exactly what it names
    with pytest.raises(SandboxUnavailable):
        await configured.select(Level.KERNEL)


async def test_a_stronger_rung_skipped_as_unavailable_is_logged_and_named_in_the_report(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # bwrap broken (its binary missing): the request falls to landlock, and says which rung it lost and why.
    config = _config(tmp_path, ladder=["bwrap", "landlock"], root="host",
                     drivers={"bwrap": {"binary": str(tmp_path / "no-bwrap")}})
    ladder = Ladder(config)
    with caplog.at_level(logging.DEBUG, logger="evalsi.sandbox.ladder"):
        sessions = [await ladder.create(SandboxSpec(min_isolation=Level.CONFINED, root=config.root))
                    for _ in range(2)]
    try:
        result = await sessions[0].exec(["sh", "-c", "echo ran"])
    finally:
        for session in sessions:
            await session.destroy()
    assert result.stdout == b"ran\n" and result.isolation.driver == "landlock", result
    for report in (sessions[0].isolation, sessions[1].isolation, result.isolation):
        assert report.bounds["skipped"].startswith("bwrap (namespaced): bwrap binary "), report.bounds
        assert "no-bwrap" in report.bounds["skipped"]
    logged = [(record.levelno, record.getMessage()) for record in caplog.records]
    # A warning the first time, then (the verdict cached) at debug level for each later request.
    assert [level for level, _ in logged] == [logging.WARNING, logging.DEBUG], logged
    assert "sandbox rung bwrap (namespaced) skipped, unavailable: bwrap binary" in logged[0][1]
    assert "running on landlock (confined)" in logged[0][1]


async def test_a_request_on_its_first_rung_reports_nothing_skipped(tmp_path: Path) -> None:
    ladder = Ladder(_config(tmp_path, ladder=["bwrap", "landlock"]))
    session = await ladder.create(SandboxSpec(min_isolation=Level.CONFINED))
    await session.destroy()
    assert session.isolation.driver == "bwrap" and "skipped" not in session.isolation.bounds


async def test_the_default_ladders_firecracker_absent_here_is_neither_warned_nor_reported(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Most hosts have no usable /dev/kvm: on the default ladder Firecracker's absence is the expected case.
    ladder = Ladder(_config(tmp_path))
    with caplog.at_level(logging.DEBUG, logger="evalsi.sandbox.ladder"):
        session = await ladder.create(SandboxSpec(min_isolation=Level.NAMESPACED))
    await session.destroy()
    firecracker = await ladder.probe("firecracker")
    assert session.isolation.driver == ("firecracker" if firecracker.available else "bwrap")
    assert "skipped" not in session.isolation.bounds, session.isolation.bounds
    assert all(record.levelno < logging.WARNING for record in caplog.records), caplog.records
    if not firecracker.available:
        assert any("sandbox rung firecracker (vm) skipped" in record.getMessage() for record in caplog.records)
    # Named in a requested ladder, the same absence is reported like any other rung's.
    if not firecracker.available:
        named = await ladder.create(SandboxSpec(min_isolation=Level.NAMESPACED, ladder=("firecracker", "bwrap")))
        await named.destroy()
        assert named.isolation.bounds["skipped"].startswith("firecracker (vm): "), named.isolation.bounds
