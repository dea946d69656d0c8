"""The vm rung's pure parts: the kernel payload extraction, the initramfs archive, the outcome dialects, the driver's
options and isolation report, and Firecracker's reasons for being unavailable."""

from __future__ import annotations

import asyncio
import gzip
import lzma
import os
import stat
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.model import Level, Outcome, Resources, SandboxSpec
from evalsi.sandbox.vm.driver import VmOptions, isolation_report, parse_options, prune_cache, sweep_stale_run_dirs
from evalsi.sandbox.vm.firecracker import FirecrackerDriver, HostFacts, unavailable_reasons
from evalsi.sandbox.vm.images import build_initramfs, cpio_newc
from evalsi.sandbox.vm.kernel import KernelMissing, extract_vmlinux, find_kernel
from evalsi.sandbox.vm.outcome import classify
from evalsi.sandbox.vm.protocol import AgentGone, read_frame
from evalsi.sandbox.vm.qemu import MachineConfig, qemu_argv

ELF = b"\x7fELF" + bytes(range(256)) * 64


@pytest.mark.parametrize("compress", [lzma.compress, gzip.compress])
def test_the_kernel_payload_is_found_inside_a_bzimage(tmp_path: Path, compress: object) -> None:
    assert callable(compress)
    # A setup header with a false start (the magic alone, no valid stream), then the payload, then a trailer.
    image = tmp_path / "vmlinuz-9.9"
    image.write_bytes(b"MZ" + b"\0" * 500 + b"\xfd7zXZ\x00junk" + b"\x1f\x8b\x08junk" + compress(ELF) + b"\0" * 64)
    out = extract_vmlinux(image, tmp_path / "cache")
    assert out.read_bytes() == ELF
    assert extract_vmlinux(image, tmp_path / "cache") == out  # cached by digest


def test_a_file_without_a_kernel_is_refused_naming_it(tmp_path: Path) -> None:
    image = tmp_path / "vmlinuz-bad"
    image.write_bytes(b"MZ" + os.urandom(4096))
    with pytest.raises(KernelMissing, match="vmlinuz-bad"):
        extract_vmlinux(image, tmp_path)


def test_find_kernel_takes_the_newest_with_modules_and_says_what_to_install(tmp_path: Path) -> None:
    boot, mods = tmp_path / "boot", tmp_path / "modules"
    boot.mkdir()
    for ver in ("6.1.0-9-amd64", "6.1.0-10-amd64", "6.12.0-1-amd64"):
        (boot / f"vmlinuz-{ver}").write_bytes(b"x")
    for ver in ("6.1.0-9-amd64", "6.1.0-10-amd64"):  # 6.12 has no modules: not usable
        (mods / ver).mkdir(parents=True)
        (mods / ver / "modules.dep").write_text("")
    assert find_kernel(boot, mods).version == "6.1.0-10-amd64"
    assert find_kernel(boot, mods, version="6.1.0-9-amd64").version == "6.1.0-9-amd64"
    with pytest.raises(KernelMissing, match="apt-get install -y linux-image-amd64"):
        find_kernel(tmp_path / "empty", mods)


def test_cpio_newc_is_what_the_kernel_unpacks(tmp_path: Path) -> None:
    blob = cpio_newc([("bin", stat.S_IFDIR | 0o755, b""), ("bin/x", stat.S_IFREG | 0o755, b"abc"),
                      ("link", stat.S_IFLNK | 0o777, b"bin/x")])
    assert blob.startswith(b"070701") and len(blob) % 4 == 0
    # The first header: inode 1, a directory, namesize 4 ("bin\0").
    assert int(blob[6:14], 16) == 1 and int(blob[14:22], 16) == stat.S_IFDIR | 0o755
    assert int(blob[94:102], 16) == 4 and blob[110:114] == b"bin\0"
    assert b"TRAILER!!!\0" in blob and b"abc\0" in blob


def test_an_initramfs_for_a_kernel_with_built_in_drivers_carries_no_modules(tmp_path: Path) -> None:
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"\x7fELF static")
    blob = build_initramfs(None, busybox, tmp_path).read_bytes()
    assert b"init\0" in blob and b"bin/busybox\0" in blob
    assert b"modules\0" not in blob and b".ko\0" not in blob
    assert b"[ -s /modules ] && for m in" in blob  # /init loads nothing when /modules is absent


@pytest.mark.parametrize(("done", "stderr", "expected"), [
    ({"returncode": 0}, b"", Outcome("exit", code=0)),
    ({"returncode": 3}, b"", Outcome("exit", code=3)),
    ({"returncode": 1}, b"cat: can't open '/etc/shadow': Permission denied", Outcome("denied",
                                                                                    effect="guest: permission denied")),
    ({"returncode": 1}, b"sh: can't create /usr/x: Read-only file system",
     Outcome("denied", effect="guest: read-only file system")),
    ({"returncode": 1}, b"OSError: [Errno 101] Network is unreachable",
     Outcome("denied", effect="guest: no network device")),
    ({"returncode": -9, "oom_kills": 1}, b"", Outcome("denied", effect="oom-kill")),
    ({"returncode": 1, "pids_max": 4}, b"BlockingIOError", Outcome("denied", effect="pids limit (guest cgroup "
                                                                                     "pids.max)")),
    ({"returncode": -9}, b"", Outcome("denied", effect="killed (SIGKILL)")),
    ({"returncode": -15}, b"", Outcome("exit", code=143)),
    ({"returncode": -9, "timed_out": True}, b"", Outcome("timeout")),
    ({"returncode": -9, "output_capped": True}, b"", Outcome("denied", effect="output cap")),
    ({"start_error": "FileNotFoundError: [Errno 2] No such file or directory: 'nope'"}, b"",
     Outcome("exit", code=127)),
    ({"start_error": "PermissionError: [Errno 13] Permission denied: '/workspace/x'"}, b"",
     Outcome("denied", effect="guest: cannot execute: PermissionError: [Errno 13] Permission denied: '/workspace/x'")),
    ({"start_error": "OSError: [Errno 24] Too many open files"}, b"",
     Outcome("runner_failure", signature="vm guest agent: OSError: [Errno 24] Too many open files")),
    ({}, b"", Outcome("runner_failure", signature="vm guest agent: no exit status")),
    # The agent's own setup refused (a cgroup file): infrastructure, even though the error says "permission".
    ({"agent_error": "PermissionError: [Errno 13] Permission denied: '/sys/fs/cgroup/exec1/memory.max'"}, b"",
     Outcome("runner_failure", signature="vm guest agent: PermissionError: [Errno 13] Permission denied: "
                                         "'/sys/fs/cgroup/exec1/memory.max'")),
])
def test_outcome_dialects(done: dict[str, object], stderr: bytes, expected: Outcome) -> None:
    assert classify(done, stderr) == expected


def test_options_are_checked_naming_the_key() -> None:
    assert parse_options({}) == VmOptions()
    assert parse_options({"warm": 0, "memory_mib": 512, "snapshots": False}).snapshots is False
    for raw, key in (({"warm": -1}, "warm"), ({"memory_mib": 100}, "memory_mib"), ({"snapshots": "yes"}, "snapshots"),
                     ({"boot_timeout": 0}, "boot_timeout"), ({"binary": ""}, "binary"), ({"nope": 1}, "nope")):
        with pytest.raises(BadInputError, match=rf"sandbox\.drivers\.qemu\.{key}"):
            parse_options(raw)


def test_the_isolation_report_says_what_applied_and_what_did_not() -> None:
    spec = SandboxSpec(min_isolation=Level.VM, resources=Resources(memory_bytes=256 << 20, pids=16))
    report = isolation_report(spec, 1024, "small 6.1.192 0123456789ab")
    assert report.level is Level.VM and report.enforcement == "full" and report.requested is Level.VM
    assert report.bounds["kernel"] == "separate guest kernel: small 6.1.192 0123456789ab (QEMU microvm, TCG: no KVM)"
    assert report.bounds["pids"] == "guest cgroup v2 pids.max=16"
    assert report.bounds["root"] == "runtime image read-only (the guest's runtime disk)"  # the default root
    big = isolation_report(SandboxSpec(resources=Resources(memory_bytes=4 << 30, cpu_seconds=5)), 1024,
                           "debian 6.1.0-57-amd64")
    assert big.enforcement == "partial"
    assert any(item.startswith("memory:") for item in big.not_enforced)
    assert "memory.max=872415232" in big.bounds["memory"]  # guest RAM less the guest's own reserve
    assert big.bounds["cpu"] == "RLIMIT_CPU=5"
    # The workspace is guest RAM: the default 1 GiB disk bound becomes half of what executions may use.
    assert big.bounds["disk"].startswith("workspace tmpfs size=436207616,")


def test_the_machine_has_no_network_device_and_a_tsc_hint() -> None:
    config = MachineConfig("qemu-system-x86_64", Path("/k"), Path("/i"), Path("/d"), 512, 2596122)
    argv = qemu_argv(config, Path("/tmp/run"))
    joined = " ".join(argv)
    assert "-nodefaults" in argv and "tsc_early_khz=2596122" in joined and "-netdev" not in argv
    assert "readonly=on" in joined and "-accel tcg" in joined and "-incoming" not in argv
    restored = qemu_argv(config, Path("/tmp/run"), incoming=Path("/c/t.state"))
    assert restored[-3:] == ["-S", "-incoming", "exec:cat /c/t.state"]


def _facts(**overrides: object) -> HostFacts:
    base: dict[str, object] = {"binary": "/usr/bin/firecracker", "kvm_exists": True, "kvm_usable": True,
                               "cpu_flags": frozenset({"vmx"}), "kvm_modules": frozenset({"kvm_intel"})}
    return HostFacts(**{**base, **overrides})  # type: ignore[arg-type]


def test_firecracker_reasons() -> None:
    assert unavailable_reasons(_facts()) == []
    assert unavailable_reasons(_facts(kvm_exists=False)) == ["no /dev/kvm"]
    pvm = unavailable_reasons(_facts(kvm_modules=frozenset({"kvm_pvm"}), cpu_flags=frozenset()))
    assert len(pvm) == 1 and "paravirtual hypervisor (kvm_pvm)" in pvm[0]
    assert "no vmx or svm" in unavailable_reasons(_facts(cpu_flags=frozenset({"sse4_2"})))[0]
    assert unavailable_reasons(_facts(binary=None)) == ["no firecracker binary on PATH"]


def test_firecracker_is_unavailable_here_with_the_reason() -> None:
    verdict = asyncio.run(FirecrackerDriver().probe())
    assert not verdict.available and verdict.level is Level.VM
    if Path("/sys/module/kvm_pvm").exists():  # this machine (INFRA.md): a PVM /dev/kvm
        assert "paravirtual hypervisor" in verdict.reason
    assert "firecracker" in verdict.reason


def test_a_hostile_frame_size_is_refused() -> None:
    async def read() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data((1 << 31).to_bytes(4, "big"))
        reader.feed_eof()
        await read_frame(reader)
    with pytest.raises(AgentGone, match="over the"):
        asyncio.run(read())


def test_run_directories_of_ended_processes_are_swept(tmp_path: Path) -> None:
    mine = tmp_path / f"evalsi-vm-{os.getpid()}-abc"
    gone = tmp_path / "evalsi-vm-999999999-abc"  # no such pid
    unrelated = tmp_path / "evalsi-vm-notapid"
    for path in (mine, gone, unrelated):
        path.mkdir()
        (path / "console.log").write_text("x")
    assert sweep_stale_run_dirs(tmp_path) == [gone]
    assert mine.is_dir() and unrelated.is_dir() and not gone.exists()


def test_the_cache_keeps_the_newest_artifacts_of_each_kind(tmp_path: Path) -> None:
    for i in range(5):
        path = tmp_path / f"template-{i}.state"
        path.write_bytes(b"x")
        os.utime(path, ns=(i * 10**9, i * 10**9))
    (tmp_path / "runtime-a.ext4").write_bytes(b"x")
    removed = prune_cache(tmp_path, {"template-*.state": 2, "runtime-*.ext4": 3})
    assert sorted(p.name for p in removed) == ["template-0.state", "template-1.state", "template-2.state"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runtime-a.ext4", "template-3.state", "template-4.state"]
