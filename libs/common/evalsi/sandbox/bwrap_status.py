"""bwrap's status file descriptor (``--json-status-fd``), read as the execution goes: the sandbox's first process
(``child-pid``, written once it is cloned and before its mounts) and the command's exit status (``exit-code``,
written only for a command bwrap started, so its absence marks a setup failure). The program cannot reach the fd."""

from __future__ import annotations

import asyncio
import json
import os

__all__ = ["StatusPipe"]

_MAX_STATUS_BYTES = 1 << 16


class StatusPipe:
    """The read end of the status pipe (non-blocking), with what has been read so far."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self._data = bytearray()
        self._eof = False

    def _drain(self) -> None:
        while not self._eof and len(self._data) < _MAX_STATUS_BYTES:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return
            if not chunk:
                self._eof = True
                return
            self._data.extend(chunk)

    def _documents(self) -> list[dict[str, object]]:
        decoder = json.JSONDecoder()
        text, position, found = self._data.decode("utf-8", "replace"), 0, []
        while position < len(text):
            while position < len(text) and text[position].isspace():
                position += 1
            if position >= len(text):
                break
            try:
                document, position = decoder.raw_decode(text, position)
            except ValueError:
                break
            if isinstance(document, dict):
                found.append(document)
        return found

    def _child_pid(self) -> int | None:
        for document in self._documents():
            pid = document.get("child-pid")
            if isinstance(pid, int) and pid > 0:
                return pid
        return None

    async def child_pid(self) -> int | None:
        """The sandbox's first process once bwrap reports it; None when bwrap exits first (a setup failure)."""
        loop = asyncio.get_running_loop()
        while True:
            self._drain()
            pid = self._child_pid()
            if pid is not None or self._eof or len(self._data) >= _MAX_STATUS_BYTES:
                return pid
            readable: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self.fd, _settle, readable)
            try:
                await readable
            finally:
                loop.remove_reader(self.fd)

    def exit_code(self) -> int | None:
        """The command's exit status, after bwrap exited; None when it never started the command."""
        self._drain()
        codes = [document["exit-code"] for document in self._documents()
                 if isinstance(document.get("exit-code"), int)]
        return int(str(codes[-1])) if codes else None

    def close(self) -> None:
        os.close(self.fd)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
