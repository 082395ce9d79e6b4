"""The per-hypothesis marker state machine: where a retrieval key starts and ends.

Markers are fixed token sequences (the tokenisation of " <<" and " >>" for the model in use).
A hypothesis is FREE (unconstrained text), inside a KEY (constrained to the corpus), or
CLOSING (the rest of a multi-token close marker is being forced). The state is immutable, so
beams can share and branch it freely.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from ragrepro.errors import ConfigError


class Mode(str, Enum):
    FREE = "free"
    KEY = "key"
    CLOSING = "closing"


@dataclass(frozen=True)
class MarkerSpec:
    open: tuple[int, ...]
    close: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.open or not self.close:
            raise ConfigError("RICHES markers must each be at least one token.")
        if self.close[0] in self.open:
            raise ConfigError("The close marker's first token also occurs in the open marker; "
                              "choose markers that tokenise apart (e.g. ' <<' and ' >>').")


@dataclass(frozen=True)
class MarkerState:
    mode: Mode = Mode.FREE
    tail: tuple[int, ...] = ()        # last free tokens, to match a multi-token open marker
    key: tuple[int, ...] = ()         # tokens of the key being decoded
    close_pos: int = 0                # tokens of the close marker already emitted
    keys: tuple[tuple[int, ...], ...] = ()  # finished keys, in order

    @property
    def in_key(self) -> bool:
        return self.mode is Mode.KEY


def step(spec: MarkerSpec, state: MarkerState, token: int) -> MarkerState:
    """The state after emitting `token`."""
    if state.mode is Mode.FREE:
        tail = (state.tail + (token,))[-len(spec.open):]
        if tail == spec.open:
            return MarkerState(Mode.KEY, (), (), 0, state.keys)
        return replace(state, tail=tail)
    if state.mode is Mode.KEY:
        if token == spec.close[0]:
            keys = state.keys + (state.key,)
            if len(spec.close) == 1:
                return MarkerState(Mode.FREE, (), (), 0, keys)
            return MarkerState(Mode.CLOSING, (), (), 1, keys)
        return replace(state, key=state.key + (token,))
    # CLOSING: the caller forces spec.close[close_pos]; anything else is a caller bug.
    if token != spec.close[state.close_pos]:
        raise ValueError(f"token {token} while forcing close marker token "
                         f"{spec.close[state.close_pos]}")
    if state.close_pos + 1 == len(spec.close):
        return MarkerState(Mode.FREE, (), (), 0, state.keys)
    return replace(state, close_pos=state.close_pos + 1)


def run(spec: MarkerSpec, tokens: list[int] | tuple[int, ...], state: MarkerState | None = None) -> MarkerState:
    state = state or MarkerState()
    for t in tokens:
        state = step(spec, state, int(t))
    return state


def spans(spec: MarkerSpec, tokens: list[int]) -> list[tuple[int, int, bool]]:
    """(start, end, closed) token offsets of every key in a generation; an unclosed last key
    runs to the end."""
    out: list[tuple[int, int, bool]] = []
    state = MarkerState()
    start = 0
    for i, t in enumerate(tokens):
        before = state.mode
        state = step(spec, state, int(t))
        if before is Mode.FREE and state.mode is Mode.KEY:
            start = i + 1
        elif before is Mode.KEY and state.mode is not Mode.KEY:
            out.append((start, i, True))
    if state.mode is Mode.KEY:
        out.append((start, len(tokens), False))
    return out
