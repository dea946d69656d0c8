"""Content-addressed on-disk cache of judge completions.

Key: sha256 of canonical JSON of {judge identity (provider, model, base_url, params), template hash,
messages}. Anything that could change the answer is in the key, so a hit is safe to reuse across runs.

Layout: ``<dir>/<key[:2]>/<key>.json``, one file per key (sharded so no directory grows huge). Files are
written to a temp file in the same directory and ``os.replace``d into place, which is atomic on POSIX and
Windows: concurrent runs and processes sharing the directory see either no file or a whole file, and
two writers of the same key race harmlessly (same content). Unreadable or malformed files are misses.

File I/O runs in ``asyncio.to_thread``: a cold or network-mounted disk can stall for milliseconds, and
judges run many calls concurrently on one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .connectors import Completion

_FORMAT = 1  # bump when the file layout changes; older files then read as misses

log = logging.getLogger(__name__)


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$EVALSI_CACHE_DIR/judge`` when set (the variable names Evals.si's cache root), else
    ``~/.cache/evalsi/judge``."""
    env = os.environ if environ is None else environ
    root = env.get("EVALSI_CACHE_DIR")
    return Path(root) / "judge" if root else Path.home() / ".cache" / "evalsi" / "judge"


def cache_key(identity: Mapping[str, Any], template_hash: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no whitespace, UTF-8) of what determines the answer."""
    doc = {"identity": dict(identity), "template_hash": template_hash, "messages": [dict(m) for m in messages]}
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class JudgeCache:
    """Completions by key on disk. ``JudgeCache.disabled()`` (for ``--no-cache``) never reads or writes."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.directory = Path(directory) if directory is not None else default_cache_dir()

    @classmethod
    def disabled(cls) -> JudgeCache:
        return cls(Path(os.devnull), enabled=False)

    key = staticmethod(cache_key)

    def path_for(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    async def get(self, key: str) -> Completion | None:
        """The cached completion (``cached=True``), or None on a miss, a corrupt file, or when disabled."""
        if not self.enabled:
            return None
        return await asyncio.to_thread(self._read, key)

    async def put(self, key: str, completion: Completion) -> None:
        """Store a successful completion. Callers must not put failures: they are not answers."""
        if not self.enabled:
            return
        try:
            await asyncio.to_thread(self._write, key, completion)
        except OSError as e:
            # The answer is good; a full or read-only cache disk must not turn it into an error.
            log.warning("judge cache: could not write %s: %s", self.path_for(key), e)

    def _read(self, key: str) -> Completion | None:
        try:
            doc = json.loads(self.path_for(key).read_text(encoding="utf-8"))
            if doc["format"] != _FORMAT or doc["key"] != key:
                return None
            c = doc["completion"]
            completion = Completion(
                text=c["text"], input_tokens=c["input_tokens"], output_tokens=c["output_tokens"],
                model=c["model"], cached=True, raw=c["raw"],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing, half-copied by hand, or garbage: recompute rather than fail the run
        types_ok = (
            isinstance(completion.text, str) and isinstance(completion.model, str)
            and isinstance(completion.raw, dict)
            and all(isinstance(n, int) and not isinstance(n, bool)
                    for n in (completion.input_tokens, completion.output_tokens))
        )
        return completion if types_ok else None

    def _write(self, key: str, completion: Completion) -> None:
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"format": _FORMAT, "key": key, "completion": asdict(replace(completion, cached=False))}
        data = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            # No fsync: losing an entry in a power cut only costs a provider call later.
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
