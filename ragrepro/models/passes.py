"""A bounded in-process memo of a frozen LM's forward passes (the last hidden states of one
exact batch), shared by the cells of one sweep process.

Why: in-context RALM's zero-shot and oracle rerankers both score every candidate by the full
window with that candidate placed (ralm.windows.rerank_input); only the scored span differs,
and the vocabulary head is applied per span after the pass. The Table 1 sweep therefore runs
the same batches of the same model twice (the zero-shot cell, then the oracle cell). A pass is
deterministic for the same weights, batch, kernel and thread count, so replaying the stored
hidden states gives the oracle cell's numbers bit for bit, and its body costs nothing.

The key is the whole batch (token ids, attention mask) plus the model's identity: how it was
loaded (source, revision, dtype, device, attention kernel), a checksum of its weights taken
when the memo is attached, and torch's thread count (a different thread count may round
differently).

Rows: the first-document and predictive cells of Table 1 score, per window, one of the very
rows the zero-shot cell ranked (the full window with that candidate placed), batched with
other windows. A batch none of whose keys is stored is still replayed when every one of its
rows is stored from batches of the same shape (rows x width): the same shape runs the same
kernels with the same blocking, and no operation of a causal LM's body mixes the rows of a
batch (matrix products, attention, norms and activations are per row), so each row's floats
do not depend on its neighbours. That is what the code of the kernels does, not what PyTorch
promises, so it is checked: bit for bit on a small model in tests/core/test_pass_memo.py, and
every Table 1 number and per-window NLL sum against the committed evidence
(docs/performance.md). A row from a batch of another shape never hits. RAGREPRO_PASS_MEMO_ROWS=0
replays whole batches only.

Bounded by bytes (least recently used evicted first); RAGREPRO_PASS_MEMO_MB sets the bound
(default 1024; 0 turns the memo off). Only CPU passes are kept (a GPU's passes are cheap and
its memory is not ours to hold).
"""
from __future__ import annotations

import hashlib
import logging
import os
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ConfigError

log = logging.getLogger(__name__)

ENV = "RAGREPRO_PASS_MEMO_MB"
DEFAULT_MB = 1024
ROWS_ENV = "RAGREPRO_PASS_MEMO_ROWS"


def weights_checksum(model: Any) -> str:
    """An order-sensitive checksum of every parameter and buffer (name, shape, dtype and
    bytes): crc32 and adler32 per tensor, combined by sha1. Fast (a few GB/s) and enough to
    tell two loads of one file apart from a model changed since (trained, merged, cast)."""
    h = hashlib.sha1()
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    for name, t in tensors:
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        # reshape(-1): a 0-dim tensor (Gemma's embedding scale) cannot be viewed as bytes
        raw = t.contiguous().reshape(-1).view(torch.uint8).numpy() if t.numel() else b""
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}:{zlib.crc32(raw)}:{zlib.adler32(raw)};"
                 .encode())
    return h.hexdigest()[:16]


def batch_key(ids: torch.Tensor, mask: torch.Tensor) -> str:
    """The batch's identity: shape and the bytes of ids and mask."""
    h = hashlib.sha1()
    h.update(repr((tuple(ids.shape), str(ids.dtype), str(mask.dtype))).encode())
    h.update(ids.contiguous().numpy().tobytes())
    h.update(mask.contiguous().numpy().tobytes())
    return h.hexdigest()


def row_keys(ids: torch.Tensor, mask: torch.Tensor) -> list[str]:
    """Each row's identity within a batch of this shape: the batch shape and the row's ids
    and mask bytes."""
    shape = repr((tuple(ids.shape), str(ids.dtype), str(mask.dtype))).encode()
    ids_np, mask_np = ids.contiguous().numpy(), mask.contiguous().numpy()
    out = []
    for j in range(ids.shape[0]):
        h = hashlib.sha1(shape)
        h.update(ids_np[j].tobytes())
        h.update(mask_np[j].tobytes())
        out.append(h.hexdigest())
    return out


def rows_enabled() -> bool:
    raw = os.environ.get(ROWS_ENV, "1")
    if raw not in ("0", "1"):
        raise ConfigError(f"{ROWS_ENV}={raw!r} must be 1 (replay rows from batches of the same "
                          f"shape, the default) or 0 (whole batches only).")
    return raw == "1"


def limit_bytes() -> int:
    raw = os.environ.get(ENV, str(DEFAULT_MB))
    try:
        mb = float(raw)
    except ValueError as e:
        raise ConfigError(f"{ENV}={raw!r} is not a number of megabytes; set it to e.g. "
                          f"{DEFAULT_MB}, or 0 to turn the pass memo off.") from e
    return max(int(mb * 2**20), 0)


@dataclass
class PassMemo:
    """LRU memo: key -> hidden-state tensor, at most `max_bytes` in all; with row keys, an
    index from each stored row to (its batch's key, its index in the batch)."""

    max_bytes: int
    entries: OrderedDict[tuple, torch.Tensor] = field(default_factory=OrderedDict)
    used: int = 0
    hits: int = 0
    misses: int = 0
    row_hits: int = 0  # batches assembled from rows of stored batches (counted in hits too)
    rows: dict[tuple, tuple[tuple, int]] = field(default_factory=dict)
    batch_rows: dict[tuple, list[tuple]] = field(default_factory=dict)

    def get_or_run(self, key: tuple, run: Callable[[], torch.Tensor],
                   row_keys: list[tuple] | None = None) -> torch.Tensor:
        if key in self.entries:
            self.entries.move_to_end(key)
            self.hits += 1
            return self.entries[key]
        if row_keys and all(r in self.rows for r in row_keys):
            self.hits += 1
            self.row_hits += 1
            found = [self.rows[r] for r in row_keys]
            for batch, _ in found:
                self.entries.move_to_end(batch)
            return torch.stack([self.entries[batch][j] for batch, j in found])
        self.misses += 1
        out = run()
        size = out.element_size() * out.numel()
        if 0 < size <= self.max_bytes and out.device.type == "cpu":
            self.entries[key] = out
            self.used += size
            if row_keys:
                self.batch_rows[key] = list(row_keys)
                for j, r in enumerate(row_keys):
                    self.rows[r] = (key, j)
            while self.used > self.max_bytes:
                self._evict_oldest()
        return out

    def _evict_oldest(self) -> None:
        old_key, old = self.entries.popitem(last=False)
        self.used -= old.element_size() * old.numel()
        for r in self.batch_rows.pop(old_key, []):
            if self.rows.get(r, (None,))[0] == old_key:
                del self.rows[r]

    def clear(self) -> None:
        self.entries.clear()
        self.rows.clear()
        self.batch_rows.clear()
        self.used = 0


_SHARED: PassMemo | None = None


def shared_memo() -> PassMemo | None:
    """The process's memo (None when RAGREPRO_PASS_MEMO_MB=0); its bound is read once."""
    global _SHARED
    if _SHARED is None:
        n = limit_bytes()
        if n == 0:
            return None
        _SHARED = PassMemo(max_bytes=n)
    return _SHARED


def reset_shared_memo() -> None:
    """Forget every stored pass and re-read the bound (tests; a long-lived process)."""
    global _SHARED
    _SHARED = None
