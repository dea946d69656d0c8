"""The vm rung's small guest kernel: its config fragment, its build (every option the fragment asks for is in the
final .config, an option Kconfig drops is an error naming it), the driver's ``kernel`` option and
``evalsi sandbox kernel show``. The guest booting it under escape attempts is test_vm_escapes.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from vm_cache import CACHE, small_kernel

from evalsi.errors import BadInputError
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.model import Level, SandboxSpec
from evalsi.sandbox.vm.boot_kernel import choose_kernel
from evalsi.sandbox.vm.driver import VmDriver, VmOptions, parse_options
from evalsi.sandbox.vm.images import BuildFailed
from evalsi.sandbox.vm.kernel import KernelMissing, find_kernel
from evalsi.sandbox.vm.small_kernel import (
    FRAGMENT,
    KernelInputs,
    build_small_kernel,
    fragment_options,
    kernel_inputs,
    missing_options,
)

# What the guest (its /init and guest_agent.py) cannot boot or work without.
NEEDED = ("CONFIG_64BIT", "CONFIG_PVH", "CONFIG_VIRTIO_MMIO", "CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES", "CONFIG_VIRTIO_BLK",
          "CONFIG_VIRTIO_CONSOLE", "CONFIG_EXT4_FS", "CONFIG_OVERLAY_FS", "CONFIG_DEVTMPFS", "CONFIG_PROC_FS",
          "CONFIG_SYSFS", "CONFIG_TMPFS", "CONFIG_BLK_DEV_INITRD", "CONFIG_BINFMT_SCRIPT", "CONFIG_MULTIUSER",
          "CONFIG_CGROUPS", "CONFIG_MEMCG", "CONFIG_CGROUP_PIDS", "CONFIG_UNIX", "CONFIG_INET", "CONFIG_FUTEX",
          "CONFIG_EPOLL")


def _evalsi(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "evalsi"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_shipped_fragment_builds_in_what_the_guest_needs() -> None:
    options = fragment_options(FRAGMENT.read_text())
    assert {name: options.get(name) for name in NEEDED} == dict.fromkeys(NEEDED, "y")
    assert "CONFIG_MODULES" not in options  # allnoconfig leaves modules off: the guest loads none


def test_a_malformed_fragment_line_is_refused_naming_its_line() -> None:
    assert fragment_options("# a comment\n\nCONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x y\"\n") == {
        "CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": '"x y"'}
    with pytest.raises(BuildFailed, match=r"guest\.config:2: 'VIRTIO=y'; accepted: CONFIG_NAME=value"):
        fragment_options("CONFIG_A=y\nVIRTIO=y\n", Path("guest.config"))


def test_an_option_the_final_config_lacks_is_named_with_what_it_got() -> None:
    wanted = {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_C": "y", "CONFIG_D": "y"}
    final = "CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\n"
    assert missing_options(wanted, final) == [
        "CONFIG_B=n (got: y)", "CONFIG_C=y (got: not set)", "CONFIG_D=y (got: not set)"]
    assert missing_options({"CONFIG_A": "y", "CONFIG_B": "n"}, "CONFIG_A=y\n") == []


def test_the_built_kernel_has_every_option_the_fragment_asks_for() -> None:
    kernel = small_kernel()
    config = kernel.config.read_text()
    assert missing_options(fragment_options(FRAGMENT.read_text()), config) == []
    assert "CONFIG_MODULES=y" not in config and "CONFIG_PCI=y" not in config
    assert kernel.path.read_bytes()[:4] == b"\x7fELF" and kernel.version.startswith("6.1.")
    inputs = kernel_inputs()
    assert kernel.digest == inputs.digest() and kernel.fragment_digest == inputs.fragment_digest()
    again, built = build_small_kernel(CACHE / "vm")
    assert not built and again == kernel  # cached by digest: a second build is a lookup


def test_a_build_whose_option_kconfig_drops_fails_naming_it_and_caches_nothing(tmp_path: Path) -> None:
    host = kernel_inputs()
    # virtio-mmio's command-line devices depend on virtio-mmio, which this fragment does not ask for.
    inputs = KernelInputs(host.source, host.source_identity, "CONFIG_64BIT=y\nCONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y\n",
                          host.toolchain)
    with pytest.raises(BuildFailed, match=r"CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y \(got: not set\)"):
        build_small_kernel(tmp_path / "vm", jobs=1, inputs=inputs)
    assert [p.name for p in (tmp_path / "vm/kernel").iterdir()] == [f".{inputs.digest()}.lock"]  # no staging left


def test_a_build_without_the_tools_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = kernel_inputs()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KernelMissing, match=re.escape("apt-get install -y --no-install-recommends linux-source-6.1 "
                                                      "build-essential flex bison bc libelf-dev")):
        build_small_kernel(tmp_path / "vm", inputs=inputs)


def test_the_kernel_option_is_checked_and_auto_falls_back_to_debian(tmp_path: Path) -> None:
    assert parse_options({}).kernel == "auto" and parse_options({"kernel": "small"}).kernel == "small"
    with pytest.raises(BadInputError, match=r"sandbox\.drivers\.qemu\.kernel: 'tiny'; accepted: auto, small, debian"):
        parse_options({"kernel": "tiny"})
    empty = tmp_path / "vm"
    fallback = choose_kernel("auto", empty)
    assert fallback.small is None and fallback.label == f"debian {find_kernel().version}"
    assert "evalsi sandbox kernel build" in fallback.why
    assert choose_kernel("auto", CACHE / "vm").label == small_kernel().label
    assert choose_kernel("debian", CACHE / "vm").label == f"debian {find_kernel().version}"


async def test_kernel_small_without_a_build_is_unavailable_naming_the_build_command(tmp_path: Path) -> None:
    driver = VmDriver(SandboxConfig(cache_dir=tmp_path / "cache"), options=VmOptions(kernel="small", warm=0))
    verdict = await driver.probe()
    assert not verdict.available
    assert "no small guest kernel is built" in verdict.reason and "evalsi sandbox kernel build" in verdict.reason
    with pytest.raises(KernelMissing, match="evalsi sandbox kernel build"):
        await driver.create(SandboxSpec(min_isolation=Level.VM))
    await driver.close()


def test_show_prints_where_the_kernel_is_and_which_one_the_rung_boots(tmp_path: Path) -> None:
    kernel = small_kernel()
    shown = _evalsi("sandbox", "kernel", "show", "--cache-dir", str(CACHE), "--format", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    facts = json.loads(shown.stdout)
    assert facts["small"]["digest"] == kernel.digest and facts["small"]["path"] == str(kernel.path)
    assert facts["small"]["size_bytes"] == kernel.path.stat().st_size and facts["small"]["version"] == kernel.version
    assert facts["fragment_digest"] == kernel.fragment_digest and facts["option"] == "auto"
    assert facts["vm_rung_boots"] == f"small {kernel.version} {kernel.digest[:12]}"
    table = _evalsi("sandbox", "kernel", "show", "--cache-dir", str(CACHE), cwd=tmp_path)
    assert f"digest:   {kernel.digest}" in table.stdout and "vm rung:  auto -> small 6.1." in table.stdout
    # Debian's kernel when the configuration asks for it; and none built in an empty cache.
    (tmp_path / "evalsi.yaml").write_text("sandbox:\n  drivers:\n    qemu:\n      kernel: debian\n")
    debian = _evalsi("sandbox", "kernel", "show", "--cache-dir", str(CACHE), cwd=tmp_path)
    assert f"vm rung:  debian -> debian {find_kernel().version}" in debian.stdout, debian.stderr
    elsewhere = tmp_path / "elsewhere"  # no evalsi.yaml: the default option, auto
    elsewhere.mkdir()
    empty = _evalsi("sandbox", "kernel", "show", "--cache-dir", str(tmp_path / "none"), "--format", "json",
                    cwd=elsewhere)
    assert json.loads(empty.stdout)["small"] is None
    assert json.loads(empty.stdout)["vm_rung_boots"] == f"debian {find_kernel().version}"
