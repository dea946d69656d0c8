"""The host's side of the guest agent's wire: 4-byte big-endian length, then a JSON object; bytes go as base64.

The same framing as ``guest_agent.py`` (which cannot import this module: it runs on the guest's standard library).
A frame over ``MAX_FRAME`` is refused in both directions, so a hostile guest cannot make the host buffer without
bound.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from typing import Any

from evalsi.errors import BadInputError

__all__ = ["MAX_FRAME", "AgentGone", "b64", "read_frame", "unb64", "write_frame"]

MAX_FRAME = 64 * 1024 * 1024


class AgentGone(ConnectionError):
    """The guest agent's connection closed or broke its framing: the guest is no longer usable."""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode(), validate=True)


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    try:
        header = await reader.readexactly(4)
        (size,) = struct.unpack(">I", header)
        if size > MAX_FRAME:
            raise AgentGone(f"guest agent sent a frame of {size} bytes, over the {MAX_FRAME} byte limit")
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise AgentGone("guest agent connection closed") from exc
    except ConnectionError as exc:
        raise AgentGone(f"guest agent connection lost: {exc}") from exc
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise AgentGone(f"guest agent sent a frame that is not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise AgentGone("guest agent sent a frame that is not a JSON object")
    return message


async def write_frame(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    body = json.dumps(message, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME:
        raise BadInputError(f"request of {len(body)} bytes is over the guest agent's frame limit of {MAX_FRAME}")
    try:
        writer.write(struct.pack(">I", len(body)) + body)
        await writer.drain()
    except ConnectionError as exc:
        raise AgentGone(f"guest agent connection lost: {exc}") from exc
