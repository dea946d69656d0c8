"""One QEMU microVM process: its command line, its QMP control socket, the guest agent's virtio-serial socket, a
cold boot or a restore from a snapshot file, and saving one.

The machine as INFRA.md measured it on hosts whose ``/dev/kvm`` stock guest kernels cannot use: ``-M microvm`` under
TCG, an uncompressed kernel, ``tsc_early_khz=<host kHz>`` on the command line (without it about one boot in four
hangs calibrating the TSC), no network device at all, no option ROMs, the runtime disk read-only, and the agent's
port on a Unix socket (a second port, ``evalsi.egress``, carries a sandbox's proxy connections). Every wait has a
hard deadline; a machine that misses one is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.child_processes import with_death_signal
from evalsi.sandbox.vm.protocol import AgentGone, read_frame

__all__ = ["Machine", "MachineConfig", "MachineFailed", "host_tsc_khz", "kernel_cmdline", "machine_type", "qemu_argv"]

_CONSOLE_TAIL = 2000
# The guest's devices beyond the command line's files: a template saved with other devices cannot be restored.
_DEVICES = "virtio-serial:evalsi.agent,evalsi.egress"


class MachineFailed(RuntimeError):
    """The VMM or the guest did not come up, or broke: infrastructure (a runner failure), never the program's doing."""


@dataclass(frozen=True)
class MachineConfig:
    qemu: str
    vmlinux: Path
    initramfs: Path
    disk: Path
    memory_mib: int
    tsc_khz: int
    boot_timeout_s: float = 30.0
    image: Path | None = None  # an image root's read-only disk (the guest runs commands chrooted into it)
    kernel: str = ""  # which kernel ``vmlinux`` is, for reports: ``small 6.1.192 <digest>``, ``debian <version>``
    # False for the small guest kernel: its ACPI fails to load microvm's DSDT ("AE_BAD_PARAMETER, During Region
    # initialization") and so never sees the virtio-mmio devices; without ACPI tables QEMU names them on the command
    # line (virtio_mmio.device=...), which the kernel parses itself.
    acpi: bool = True

    def identity(self) -> str:
        """What a snapshot depends on: a restore needs the same machine, kernel, disk and memory size."""
        return json.dumps([self.qemu, machine_type(self), str(self.vmlinux), str(self.initramfs), str(self.disk),
                           self.memory_mib, kernel_cmdline(self), str(self.image or ""), _DEVICES])


def host_tsc_khz() -> int:
    """The host's TSC frequency in kHz: the kernel's own figure where it exports one, else /proc/cpuinfo's MHz."""
    with contextlib.suppress(OSError, ValueError):
        return int(Path("/sys/devices/system/cpu/cpu0/tsc_freq_khz").read_text().strip())
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return int(float(line.partition(":")[2]) * 1000)
    raise MachineFailed("cannot read the host's TSC frequency (/proc/cpuinfo has no 'cpu MHz')")


def machine_type(config: MachineConfig) -> str:
    return "microvm,x-option-roms=off,rtc=off" + ("" if config.acpi else ",acpi=off")


def kernel_cmdline(config: MachineConfig) -> str:
    return " ".join([
        "console=ttyS0", "quiet", "panic=-1", "rdinit=/init", f"tsc_early_khz={config.tsc_khz}",
        "tsc=reliable", "no_timer_check", "random.trust_cpu=on",
        # Devices a microvm does not have: probing them only costs boot time (the CMOS clock's probe alone was
        # a second under TCG); the guest agent sets the clock on every restore.
        "pci=off", "8250.nr_uarts=1", "i8042.noaux", "i8042.nomux", "i8042.nopnp", "i8042.dumbkbd",
        "initcall_blacklist=cmos_init", "cryptomgr.notests", "audit=0",
        # TCG does not speculate: the guest's speculative-execution mitigations would cost time and protect nothing.
        "mitigations=off"])


def qemu_argv(config: MachineConfig, run_dir: Path, *, incoming: Path | None = None) -> list[str]:
    cmdline = kernel_cmdline(config)
    argv = [
        config.qemu, "-M", machine_type(config), "-accel", "tcg", "-cpu", "max",
        "-m", f"{config.memory_mib}M", "-smp", "1", "-nodefaults", "-no-user-config", "-no-reboot",
        "-display", "none", "-monitor", "none",
        "-kernel", str(config.vmlinux), "-initrd", str(config.initramfs), "-append", cmdline,
        "-serial", f"file:{run_dir / 'console.log'}",
        "-drive", f"id=rt,file={config.disk},format=raw,if=none,readonly=on",
        "-device", "virtio-blk-device,drive=rt",
        *(["-drive", f"id=img,file={config.image},format=raw,if=none,readonly=on",
           "-device", "virtio-blk-device,drive=img"] if config.image is not None else []),
        "-device", "virtio-serial-device",
        "-chardev", f"socket,id=agent,path={run_dir / 'agent.sock'},server=on,wait=off",
        "-device", "virtserialport,chardev=agent,name=evalsi.agent",
        # The egress port, on every machine (a restore needs the template's devices); the host connects to it only
        # for a sandbox with an allowlist (egress_bridge.py), and the guest opens it only when told to.
        "-chardev", f"socket,id=egress,path={run_dir / 'egress.sock'},server=on,wait=off",
        "-device", "virtserialport,chardev=egress,name=evalsi.egress",
        "-qmp", f"unix:{run_dir / 'qmp.sock'},server=on,wait=off",
    ]
    if incoming is not None:
        argv += ["-S", "-incoming", f"exec:cat {shlex.quote(str(incoming))}"]
    return argv


class Machine:
    """A started QEMU process with its QMP and agent connections."""

    def __init__(self, config: MachineConfig, run_dir: Path, process: asyncio.subprocess.Process) -> None:
        self.config = config
        self.run_dir = run_dir
        self.process = process
        self.agent_reader: asyncio.StreamReader | None = None
        self.agent_writer: asyncio.StreamWriter | None = None
        self._qmp_reader: asyncio.StreamReader | None = None
        self._qmp_writer: asyncio.StreamWriter | None = None

    @classmethod
    async def launch(cls, config: MachineConfig, run_dir: Path, *, incoming: Path | None = None) -> Machine:
        """Start QEMU and connect to its sockets; a cold boot waits for the agent's ready frame, a restore loads the
        snapshot and continues the guest. Raises ``MachineFailed`` (with the console's tail) past the deadline."""
        argv = qemu_argv(config, run_dir, incoming=incoming)
        log = (run_dir / "qemu.log").open("wb")
        try:
            process = await asyncio.create_subprocess_exec(
                *with_death_signal(argv), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        except OSError as exc:
            raise MachineFailed(f"cannot start {config.qemu}: {exc}") from exc
        finally:
            log.close()
        machine = cls(config, run_dir, process)
        try:
            async with asyncio.timeout(config.boot_timeout_s):
                await machine._connect_qmp()
                if incoming is not None:
                    await machine._await_incoming()
                    await machine.qmp("cont")
                await machine._connect_agent()
                if incoming is None:
                    ready = await read_frame(machine._agent_reader())
                    if not ready.get("ready"):
                        raise MachineFailed(f"guest agent's first frame is not ready: {str(ready)[:200]}")
        except TimeoutError:
            diagnostics = machine.diagnostics()
            await machine.kill()
            raise MachineFailed(f"microVM not ready within {config.boot_timeout_s:g}s{diagnostics}") from None
        except (MachineFailed, AgentGone, OSError) as exc:
            diagnostics = machine.diagnostics()
            await machine.kill()
            raise MachineFailed(f"{exc}{diagnostics}") from exc
        except BaseException:  # cancelled (a pool refill at shutdown): no QEMU may outlive its launch
            await asyncio.shield(machine.kill())
            raise
        return machine

    def _agent_reader(self) -> asyncio.StreamReader:
        assert self.agent_reader is not None
        return self.agent_reader

    async def _connect_qmp(self) -> None:
        self._qmp_reader, self._qmp_writer = await self._open(self.run_dir / "qmp.sock")
        await self._qmp_reader.readline()  # the greeting
        await self.qmp("qmp_capabilities")

    async def _connect_agent(self) -> None:
        self.agent_reader, self.agent_writer = await self._open(self.run_dir / "agent.sock", limit=1 << 20)

    async def _open(self, path: Path, limit: int = 1 << 16) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while True:
            if self.process.returncode is not None:
                raise MachineFailed(f"qemu exited with status {self.process.returncode} before {path.name} opened")
            try:
                return await asyncio.open_unix_connection(str(path), limit=limit)
            except (FileNotFoundError, ConnectionRefusedError):
                await asyncio.sleep(0.005)

    async def qmp(self, command: str, arguments: dict[str, Any] | None = None) -> Any:
        if self._qmp_writer is None or self._qmp_reader is None:
            raise MachineFailed("QMP is not connected")
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        self._qmp_writer.write(json.dumps(request).encode() + b"\n")
        await self._qmp_writer.drain()
        while True:
            line = await self._qmp_reader.readline()
            if not line:
                raise MachineFailed(f"QMP closed during {command}")
            reply = json.loads(line)
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                raise MachineFailed(f"QMP {command}: {reply['error'].get('desc', reply['error'])}")
            # anything else is an asynchronous event: not the answer

    async def _await_incoming(self) -> None:
        while True:
            status = (await self.qmp("query-status")).get("status")
            if status != "inmigrate":
                return
            await asyncio.sleep(0.005)

    async def save(self, path: Path) -> None:
        """The guest's whole state (RAM and devices) into ``path``; the guest stays stopped (``resume`` to go on)."""
        await self.qmp("stop")
        # The default migration bandwidth (128 MiB/s) would make saving a 1 GiB guest take seconds for no reason.
        await self.qmp("migrate-set-parameters", {"max-bandwidth": 1 << 40})
        await self.qmp("migrate", {"uri": f"exec:cat > {shlex.quote(str(path))}"})
        while True:
            info = await self.qmp("query-migrate")
            status = info.get("status")
            if status == "completed":
                return
            if status in ("failed", "cancelled"):
                raise MachineFailed(f"snapshot failed: {info.get('error-desc', status)}")
            await asyncio.sleep(0.005)

    async def resume(self) -> None:
        await self.qmp("cont")

    def diagnostics(self) -> str:
        tails = []
        for name in ("console.log", "qemu.log"):
            with contextlib.suppress(OSError):
                text = (self.run_dir / name).read_bytes()[-_CONSOLE_TAIL:].decode(errors="replace").strip()
                if text:
                    tails.append(f"{name}: {text[-500:]}")
        return ("; " + "; ".join(tails)) if tails else ""

    async def kill(self) -> None:
        """Ends QEMU and removes the run directory (sockets, console log)."""
        for writer in (self.agent_writer, self._qmp_writer):
            if writer is not None:
                writer.close()
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
            await self.process.wait()
        shutil.rmtree(self.run_dir, ignore_errors=True)

