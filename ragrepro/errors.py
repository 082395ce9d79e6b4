"""Errors a user can act on. Every message names the problem and the fix."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class RagreproError(Exception):
    """Base class: an error caused by input or configuration, not by a bug."""


class ConfigError(RagreproError):
    """Settings that cannot work (alone or together)."""


class DataError(RagreproError):
    """A malformed or missing input file, line or field."""


class OfflineError(RagreproError):
    """A hub model or dataset was requested on a machine without hub access."""


class NumericsError(RagreproError):
    """A NaN or infinite value where a finite number is required. `rows` names the offending
    inputs (indices into the caller's list) so the caller can name the window or example."""

    def __init__(self, message: str, rows: list[int] | None = None):
        super().__init__(message)
        self.rows = rows or []


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """A ' Did you mean ...?' suffix, or '' when nothing is close."""
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    return f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def unknown_name(kind: str, name: str, choices: Iterable[str]) -> ConfigError:
    choices = sorted(choices)
    return ConfigError(
        f"Unknown {kind} {name!r}.{did_you_mean(name, choices)} "
        f"Known {kind}s: {', '.join(choices)}."
    )
