"""The guest agent: PID 1 of the microVM, serving exec and file requests from the host over a virtio-serial port.

It is copied onto the guest's read-only runtime disk and run there by the guest's Python (``python3 -I -S``), so it
uses the standard library only and imports nothing of evalsi. One request at a time; frames are a 4-byte big-endian
length then a JSON object (bytes in base64), the same framing as ``evalsi.sandbox.vm.protocol``.

Every command runs as uid/gid 65534 in a new session, inside its own cgroup v2 group of the guest kernel
(``memory.max``, ``pids.max``; ``memory.events`` and ``pids.events`` say which bound stopped it) and is ended by
``cgroup.kill``, which also stops whatever it left running. The workspace and ``/tmp`` are tmpfs; the rest of the
guest's root is the read-only disk.

With an allowlist, the refresh starts the egress relay (a forked process): 127.0.0.1:3128 in the guest, each
connection a stream over the ``evalsi.egress`` port to the host's proxy (the wire of ``egress_bridge.py``).
"""

import base64
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import resource
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import time

PORT_NAME = "evalsi.agent"
EGRESS_PORT_NAME = "evalsi.egress"
UID = 65534
WORKSPACE = "/workspace"
IMAGE = "/image"  # an image root's disk, when the sandbox has one
SROOT = "/sroot"  # the commands' root made of it
CGROUP = "/sys/fs/cgroup"
MAX_FRAME = 64 * 1024 * 1024
RNDRESEEDCRNG = 0x5207  # _IO('R', 0x07)
CLONE_NEWNS = 0x20000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
LIBC = ctypes.CDLL(None, use_errno=True)
_counter = [0]


def log(message):
    sys.stderr.write(f"evalsi-agent: {message}\n")
    sys.stderr.flush()


def mount(source, target, fstype, flags=0, data=""):
    if LIBC.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode() or None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype} on {target}: {os.strerror(err)}")


def setup(workspace_bytes):
    os.makedirs(WORKSPACE, exist_ok=True)
    nosuid_nodev = 2 | 4  # MS_NOSUID | MS_NODEV
    mount("tmpfs", "/tmp", "tmpfs", nosuid_nodev, "mode=1777,size=64m")
    mount("tmpfs", WORKSPACE, "tmpfs", nosuid_nodev, f"mode=0755,size={workspace_bytes},uid={UID},gid={UID}")
    mount("cgroup2", CGROUP, "cgroup2", nosuid_nodev | 8)  # | MS_NOEXEC
    with open(f"{CGROUP}/cgroup.subtree_control", "w") as f:
        f.write("+memory +pids")
    if os.path.ismount(IMAGE):
        setup_image_root(nosuid_nodev)


def setup_image_root(nosuid_nodev):
    """The image (read-only ext4) as the commands' root: an overlay only so that the mount points it may lack
    exist, then read-only, with the guest's workspace, /tmp, /proc and /dev mounted in it."""
    mount("tmpfs", "/run", "tmpfs", nosuid_nodev, "mode=0700,size=8m")
    os.makedirs("/run/upper", exist_ok=True)
    os.makedirs("/run/work", exist_ok=True)
    mount("overlay", SROOT, "overlay", nosuid_nodev, f"lowerdir={IMAGE},upperdir=/run/upper,workdir=/run/work")
    for name, mode in (("workspace", 0o755), ("tmp", 0o1777), ("proc", 0o555), ("dev", 0o755)):
        target = f"{SROOT}/{name}"
        if os.path.islink(target) or (os.path.exists(target) and not os.path.isdir(target)):
            os.unlink(target)  # the image's own entry gives way to the sandbox's mount point
        os.makedirs(target, mode=mode, exist_ok=True)
    mount(WORKSPACE, f"{SROOT}/workspace", "", MS_BIND)
    mount("/tmp", f"{SROOT}/tmp", "", MS_BIND)
    mount("proc", f"{SROOT}/proc", "proc", nosuid_nodev | 8)
    mount("/dev", f"{SROOT}/dev", "", MS_BIND | MS_REC)
    mount("none", SROOT, "", MS_REMOUNT | MS_RDONLY | nosuid_nodev)


def find_port(port_name=PORT_NAME):
    base = "/sys/class/virtio-ports"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            try:
                with open(f"{base}/{name}/name") as f:
                    if f.read().strip() == port_name:
                        return f"/dev/{name}"
            except OSError:
                pass
        time.sleep(0.01)
    raise RuntimeError(f"no virtio-serial port named {port_name}")


class Port:
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)

    def read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(self.fd, n - len(buf))
            if not chunk:  # the host end is not connected: wait for it (virtio-serial gives EOF then)
                time.sleep(0.01)
                continue
            buf += chunk
        return bytes(buf)

    def recv(self):
        (size,) = struct.unpack(">I", self.read_exact(4))
        if size > MAX_FRAME:
            raise ValueError(f"frame of {size} bytes over {MAX_FRAME}")
        return json.loads(self.read_exact(size))

    def send(self, message):
        body = json.dumps(message, separators=(",", ":")).encode()
        data = struct.pack(">I", len(body)) + body
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]


def b64(data):
    return base64.b64encode(data).decode()


def unb64(text):
    return base64.b64decode(text.encode())


def read_int(path, key=None):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return 0
    if key is None:
        return int(text.strip() or 0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_group(group):
    try:
        with open(f"{group}/cgroup.kill", "w") as f:
            f.write("1")
    except OSError:
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and read_int(f"{group}/cgroup.events", "populated"):
        reap()
        time.sleep(0.005)
    reap()
    with contextlib.suppress(OSError):
        os.rmdir(group)


def do_exec(port, req):
    cwd = req.get("cwd") or WORKSPACE
    if cwd != WORKSPACE and not os.path.isdir(cwd):  # a workdir beneath the workspace, made on first use
        os.makedirs(cwd, mode=0o755, exist_ok=True)
        os.chown(cwd, UID, UID)
    _counter[0] += 1
    group = f"{CGROUP}/exec{_counter[0]}"
    os.mkdir(group)
    with open(f"{group}/memory.max", "w") as f:
        f.write(str(int(req["memory"])))
    with open(f"{group}/pids.max", "w") as f:
        f.write(str(int(req["pids"])))
    cap = int(req["output"])
    env = dict(req.get("env") or {})

    def enter():
        # In the child, before exec, still root: into the group, the rlimits cgroups do not cover, then uid 65534
        # (subprocess's own user= would drop root before this runs, and the group could not be entered).
        with open(f"{group}/cgroup.procs", "w") as f:
            f.write("0")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(req["disk"]), int(req["disk"])))
        if req.get("cpu"):
            # SIGXCPU at the bound (a denial the classification names); SIGKILL a second later if it is ignored.
            resource.setrlimit(resource.RLIMIT_CPU, (int(req["cpu"]), int(req["cpu"]) + 1))
        chroot = os.path.ismount(SROOT)
        if req.get("readonly"):
            # Its own mount namespace, where the workspace is read-only: the agent's view stays writable.
            if LIBC.unshare(CLONE_NEWNS) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
            mount("none", "/", "", MS_REC | MS_PRIVATE)
            # This namespace's copies of the workspace mounts (where the cwd already is) become read-only; the
            # tmpfs itself, and the agent's copy, stay writable.
            for target in (WORKSPACE, f"{SROOT}/workspace") if chroot else (WORKSPACE,):
                mount("none", target, "", MS_REMOUNT | MS_BIND | MS_RDONLY | 2 | 4)
        if chroot:
            os.chroot(SROOT)
            os.chdir(cwd)
        os.setgroups([])
        os.setresgid(UID, UID, UID)
        os.setresuid(UID, UID, UID)

    started = time.monotonic()
    try:
        proc = subprocess.Popen(req["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, cwd=cwd,
                                start_new_session=True, preexec_fn=enter, close_fds=True)
    except OSError as exc:  # the program could not be executed: its own failure (missing, not executable)
        kill_group(group)
        port.send({"done": True, "start_error": f"{type(exc).__name__}: {exc}"})
        return
    except subprocess.SubprocessError as exc:  # our pre-exec setup failed in the child: infrastructure
        kill_group(group)
        port.send({"done": True, "agent_error": f"{type(exc).__name__}: {exc}"})
        return
    # stdin is fed from the loop below as the program reads it: a program that never reads must not block the agent.
    pending = memoryview(unb64(req.get("stdin") or ""))
    stdin_fd = proc.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    if not pending:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    deadline = started + float(req["timeout"])
    streams = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr"}
    sizes = {"stdout": 0, "stderr": 0}
    truncated = {"stdout": False, "stderr": False}
    timed_out = capped = False
    exited_at = None
    while streams:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            timed_out = True
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.2:
            # The command ended but something it started still holds its output open: the execution is over
            # (what was left running is killed with the group below), not waiting for the timeout.
            break
        writing = [stdin_fd] if pending else []
        ready, writable, _ = select.select(list(streams), writing, [], min(left, 0.05 if exited_at else 0.1))
        if writable:
            try:
                pending = pending[os.write(stdin_fd, pending[:65536]):]
            except (BrokenPipeError, BlockingIOError) as exc:
                if isinstance(exc, BrokenPipeError):
                    pending = memoryview(b"")
            if not pending:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for fd in ready:
            chunk = os.read(fd, 65536)
            name = streams[fd]
            if not chunk:
                del streams[fd]
                continue
            room = cap - sizes[name]
            kept = chunk[:max(room, 0)]
            if kept:
                sizes[name] += len(kept)
                port.send({"stream": name, "data": b64(kept)})
            if len(chunk) > room:
                truncated[name] = True
                capped = True
        if capped:
            break
    if not timed_out and not capped:
        left = max(deadline - time.monotonic(), 0)
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
    with contextlib.suppress(OSError):
        proc.stdin.close()  # what the program did not read is dropped
    oom = read_int(f"{group}/memory.events", "oom_kill")
    pids_max = read_int(f"{group}/pids.events", "max")
    cpu_usec = read_int(f"{group}/cpu.stat", "usage_usec")
    peak = read_int(f"{group}/memory.peak")  # the group's peak charge (its page cache included)
    kill_group(group)
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    port.send({"done": True, "returncode": code, "timed_out": timed_out, "output_capped": capped,
               "oom_kills": oom, "pids_max": pids_max, "truncated": truncated,
               "duration": time.monotonic() - started, "cpu_usec": cpu_usec, "memory_peak": peak})


def inside(path):
    full = os.path.normpath(os.path.join(WORKSPACE, path))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        raise ValueError(f"{path!r} is outside the workspace {WORKSPACE}")
    return full


def open_beneath(path, flags):
    """Opens a workspace path without following any link on the way (a link the program planted is refused)."""
    try:
        return _open_beneath(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ValueError(f"{path!r}: a symbolic link on the way or at the end, or not a directory (links in "
                             "the sandbox are never followed)") from None
        raise ValueError(f"{path!r}: {exc.strerror}") from None


def _open_beneath(path, flags):
    full = inside(path)
    parts = [p for p in full[len(WORKSPACE):].split("/") if p]
    fd = os.open(WORKSPACE, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if last:
                return os.open(part, flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=fd)
            if flags & os.O_CREAT:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    os.chown(part, UID, UID, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        raise ValueError(f"{path!r} names the workspace itself, not a file")
    finally:
        os.close(fd)


def do_write(req):
    for path, data in req["files"].items():
        fd = open_beneath(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.fchown(fd, UID, UID)
            blob = unb64(data)
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    return {"ok": True}


def do_read(req):
    limit = int(req["max"])
    files = {}
    for path in req["paths"]:
        fd = open_beneath(path, os.O_RDONLY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"{path!r} is not a regular file")
            data = os.read(fd, limit + 1)
        finally:
            os.close(fd)
        if len(data) > limit:
            raise ValueError(f"{path!r} is over the read limit of {limit} bytes")
        files[path] = b64(data)
    return {"files": files}


def do_refresh(req):
    # A clone restored from a snapshot shares the template's RNG state and clock: fresh entropy and the time.
    # A write only mixes into the input pool; the ChaCha state clones share is replaced at the next reseed, which
    # RNDRESEEDCRNG forces now.
    with open("/dev/urandom", "wb") as f:
        f.write(unb64(req["seed"]))
        f.flush()
        fcntl.ioctl(f.fileno(), RNDRESEEDCRNG)
    time.clock_settime(time.CLOCK_REALTIME, float(req["time"]))
    if req.get("workspace"):  # this session's disk bound (the template booted with the default)
        mount("tmpfs", WORKSPACE, "tmpfs", 32 | 2 | 4, f"size={int(req['workspace'])}")  # MS_REMOUNT
    # A relay restored from a snapshot belongs to an earlier host connection: it goes, and one starts when this
    # session has an allowlist (the template never has one).
    stop_relay()
    if req.get("egress"):
        start_relay(req["egress"])
    return {"ok": True}


# --- egress: the relay between 127.0.0.1:<port> and the host's proxy (the wire of evalsi.sandbox.vm.egress_bridge)

OPEN, DATA, CLOSE = 1, 2, 3
HEADER = struct.Struct(">BII")
MAX_PAYLOAD = 32 * 1024
_relay = [0]  # the relay's pid, 0 when none runs


def stop_relay():
    pid, _relay[0] = _relay[0], 0
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def start_relay(egress):
    path = find_port(EGRESS_PORT_NAME)
    loopback_up()
    # Bound before the fork: a command can never take the port first, and a failure is the refresh's answer.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(egress["port"])))
    listener.listen(64)
    pid = os.fork()
    if pid == 0:  # a process of its own, so that exec requests never wait on it (the agent is single-threaded)
        code = 0
        try:
            relay(os.open(path, os.O_RDWR), listener, bytes.fromhex(egress["nonce"]), int(egress["streams"]))
        except BaseException as exc:  # the relay says why on the console, then ends
            log(f"egress relay ended: {type(exc).__name__}: {exc}")
            code = 1
        os._exit(code)
    listener.close()
    _relay[0] = pid


def loopback_up():
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), siocgifflags, request))[1]
        fcntl.ioctl(s.fileno(), siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_port(fd):
    chunk = os.read(fd, 65536)
    if not chunk:  # the host end is not connected (virtio-serial gives EOF): wait for it without spinning
        time.sleep(0.01)
    return chunk


def relay(fd, listener, nonce, max_streams):
    write_all(fd, nonce)
    buf = bytearray()
    while nonce not in buf:  # what an earlier host connection left in flight is discarded
        buf += read_port(fd)
        del buf[:max(len(buf) - (1 << 20), 0)]
    del buf[:buf.index(nonce) + len(nonce)]
    streams, ids, next_id = {}, {}, 1

    def end(stream, tell):
        sock = streams.pop(stream, None)
        if sock is not None:
            del ids[sock]
            sock.close()
            if tell:
                write_all(fd, HEADER.pack(CLOSE, stream, 0))

    while True:
        ready, _, _ = select.select([fd, listener, *ids], [], [])
        if listener in ready:
            conn, _ = listener.accept()
            if len(streams) >= max_streams:
                conn.close()  # over the bound: refused here, before the host sees it
            else:
                conn.settimeout(10)  # a program that stops reading its socket stalls its own egress, for 10 s
                streams[next_id], ids[conn] = conn, next_id
                write_all(fd, HEADER.pack(OPEN, next_id, 0))
                next_id += 1
        if fd in ready:
            buf += read_port(fd)
        while len(buf) >= HEADER.size:
            kind, stream, size = HEADER.unpack_from(buf)
            if size > MAX_PAYLOAD or kind not in (DATA, CLOSE):
                raise ValueError(f"the host broke the egress wire: type {kind}, {size} bytes")
            if len(buf) < HEADER.size + size:
                break
            payload = bytes(buf[HEADER.size:HEADER.size + size])
            del buf[:HEADER.size + size]
            if kind == CLOSE:
                end(stream, False)
            elif stream in streams:
                try:
                    streams[stream].sendall(payload)
                except OSError:
                    end(stream, True)
        for sock in [sock for sock in ready if sock in ids]:
            stream = ids[sock]
            try:
                data = sock.recv(MAX_PAYLOAD)
            except OSError:
                data = b""
            if data:
                write_all(fd, HEADER.pack(DATA, stream, len(data)) + data)
            else:
                end(stream, True)


def serve(port):
    port.send({"ready": True})
    while True:
        req = port.recv()
        op = req.get("op")
        try:
            if op == "exec":
                do_exec(port, req)
                continue
            if op == "write":
                reply = do_write(req)
            elif op == "read":
                reply = do_read(req)
            elif op == "refresh":
                reply = do_refresh(req)
            elif op == "ping":
                reply = {"ok": True}
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # one bad request must not take PID 1 (and the guest) down
            # The agent's own failure (a cgroup it could not make, a bad request): never the program's doing.
            reply = {"done": True, "agent_error": f"{type(exc).__name__}: {exc}"} if op == "exec" else {
                "error": f"{type(exc).__name__}: {exc}"}
        port.send(reply)


def main():
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    workspace_bytes = 256 * 1024 * 1024
    with open("/proc/cmdline") as f:
        words = f.read().split()
    for word in words:
        if word.startswith("evalsi.workspace="):
            workspace_bytes = int(word.partition("=")[2])
    try:
        setup(workspace_bytes)
        port = Port(find_port())
    except Exception as exc:  # PID 1 must not just vanish: say why on the console, then power off
        log(f"setup failed: {type(exc).__name__}: {exc}")
        raise
    serve(port)


if __name__ == "__main__":
    main()
