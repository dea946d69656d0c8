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
from typing import TYPE_CHECKING, Any, Protocol

from .connectors import Completion

if TYPE_CHECKING:  # the stores load only where a shared cache is built
    from evalsi.stores.objects import ObjectStore

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


def encode_entry(key: str, completion: Completion) -> bytes:
    """One cache entry as bytes (the same format on disk and in a shared object store)."""
    doc = {"format": _FORMAT, "key": key, "completion": asdict(replace(completion, cached=False))}
    return json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")


def decode_entry(key: str, data: bytes) -> Completion | None:
    """The completion of an entry (``cached=True``), or None for anything malformed: recompute, don't fail."""
    try:
        doc = json.loads(data)
        if doc["format"] != _FORMAT or doc["key"] != key:
            return None
        c = doc["completion"]
        completion = Completion(
            text=c["text"], input_tokens=c["input_tokens"], output_tokens=c["output_tokens"],
            model=c["model"], cached=True, raw=c["raw"],
        )
    except (ValueError, KeyError, TypeError):
        return None
    types_ok = (
        isinstance(completion.text, str) and isinstance(completion.model, str)
        and isinstance(completion.raw, dict)
        and all(isinstance(n, int) and not isinstance(n, bool)
                for n in (completion.input_tokens, completion.output_tokens))
    )
    return completion if types_ok else None


class CompletionCache(Protocol):
    """What a judge client asks of a cache; the on-disk ``JudgeCache`` and the ``SharedJudgeCache`` both answer."""

    @property
    def enabled(self) -> bool: ...

    def key(self, identity: Mapping[str, Any], template_hash: str, messages: Sequence[Mapping[str, Any]]) -> str: ...

    async def get(self, key: str) -> Completion | None: ...

    async def put(self, key: str, completion: Completion) -> None: ...


class SharedJudgeCache:
    """Judge answers in the object store (S3 or a shared directory), so every worker of a deployment
    reuses every other's answers. Same keys and entry format as the on-disk cache."""

    enabled = True
    key = staticmethod(cache_key)

    def __init__(self, objects: ObjectStore, prefix: str = "judge-cache") -> None:
        self._objects = objects
        self._prefix = prefix

    def _name(self, key: str) -> str:
        return f"{self._prefix}/{key[:2]}/{key}.json"

    async def get(self, key: str) -> Completion | None:
        try:
            data, _etag = await self._objects.get_named(self._name(key))
        except KeyError:
            return None
        except Exception as e:  # a store hiccup is a miss: the provider answers instead
            log.warning("shared judge cache: could not read %s: %s", key, e)
            return None
        return decode_entry(key, data)

    async def put(self, key: str, completion: Completion) -> None:
        try:
            await self._objects.put_named(self._name(key), encode_entry(key, completion), if_none_match=True)
        except Exception as e:  # already there (another worker answered first), or the store is down
            log.debug("shared judge cache: not written %s: %s", key, e)


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
            return decode_entry(key, self.path_for(key).read_bytes())
        except OSError:
            return None

    def _write(self, key: str, completion: Completion) -> None:
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = encode_entry(key, completion)
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
