"""The plugin process's entry point: ``python -m evalsi.plugins.main --entrypoint module:attr --socket PATH``.

The host starts this in the plugin's own virtualenv; ``module:attr`` names a Pack, an Evaluator or a list of them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
import time

from evalsi.plugins.server import DEFAULT_MAX_MESSAGE_BYTES, serve


def _load(entrypoint: str) -> object:
    module_name, _, attr = entrypoint.partition(":")
    if not module_name or not attr:
        raise SystemExit(f"--entrypoint {entrypoint!r}: expected module:attribute")
    target: object = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def _exit_with_parent(parent: int, every_s: float = 0.5) -> None:
    """End this process once its host is gone (even SIGKILLed): it is re-parented then. Nothing else would stop a
    plugin whose host could not."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evalsi.plugins.main", description=__doc__)
    parser.add_argument("--entrypoint", required=True, help="module:attribute naming a Pack, Evaluator or list")
    parser.add_argument("--socket", required=True, help="the Unix socket to serve on (its directory must be 0700)")
    parser.add_argument("--max-message-bytes", type=int, default=DEFAULT_MAX_MESSAGE_BYTES,
                        help="the largest message either way (default 64 MiB)")
    args = parser.parse_args(argv)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True, name="evalsi-plugin-parent").start()
    serve(_load(args.entrypoint), args.socket, max_message_bytes=args.max_message_bytes)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
