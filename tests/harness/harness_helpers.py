"""Helpers the harness tests share (imported by name: tests/harness is on sys.path under pytest)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from evalsi.harness import HarnessConfig, config_from_mapping
from evalsi.ports import free_port

HERE = Path(__file__).parent
MCP_SERVER = str(HERE / "harness_mcp_server.py")


def make_config(base_url: str, *, provider: str = "openai", **extra: Any) -> HarnessConfig:
    """A config against a fake provider; no retries, so a failing provider fails fast."""
    doc = {"model": {"provider": provider, "model": "fake-model", "base_url": base_url, "max_retries": 0,
                     "timeout_s": 10}, **extra}
    return config_from_mapping(doc, source="test.yaml")


@contextlib.asynccontextmanager
async def mcp_http_server(*, json_response: bool = False) -> AsyncIterator[str]:
    """The test MCP server over streamable HTTP in a subprocess; yields its URL once it accepts connections."""
    port = free_port()
    args = [sys.executable, MCP_SERVER, "http", str(port)] + (["json"] if json_response else [])
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the MCP test server did not start: {process.stderr.read()!r}") from None
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
