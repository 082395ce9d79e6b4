"""Real-model rehearsal (`rehearsal.real_models=true`, `make rehearse-real`): a paper cell
whose model's architecture class has a real embedded member runs that member, with its real
tokenizer, instead of the random stand-in, so its generations can be read: a random model
never stops, a real one shows whether the configured budgets let it stop.

The family of a cell is the transformers class of its hub model (STANDINS in standins.py,
from each checkpoint's config.json); the members below are the embedded models of that
class (their settings come from conf/model/<member>.yaml, not from here). `choose` is pure;
whether a member is installed is asked through the `available` callable it is given."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from omegaconf import DictConfig, OmegaConf

from .. import assets
from ..errors import ConfigError, RagreproError
from ..paths import CONF_DIR
from .standins import needs_standin, standin_spec

# architecture class -> (conf/model/<member>.yaml, optional: installed only by an opt-in
# target). Facts from the GGUF files (docs: shared reference environment.md): SmolLM2-135M
# is llama, Gemma-3-270M gemma3, Qwen2.5-Coder qwen2 (`make setup-ladder` only).
MEMBERS: dict[str, tuple[str, bool]] = {
    "LlamaForCausalLM": ("smollm2-135m", False),
    "Gemma3ForCausalLM": ("gemma3-270m", False),
    "Qwen2ForCausalLM": ("qwen2.5-coder-0.5b", True),
}
# Fields of the member's model config that define what is loaded and how it is fed
# (name, weights, BOS policy); device, dtype and attention stay the cell's.
MEMBER_FIELDS = ("name", "source", "revision", "add_bos", "kind")
STANDIN_NO_MEMBER = "stand-in (no embedded member)"


@dataclass(frozen=True)
class Choice:
    """What a cell runs in real mode."""

    family: str          # the hub model's architecture class ("" when the cell's model is local)
    used: str            # the member's config name, or a stand-in note
    real: bool           # True: the real member replaces the stand-in
    note: str = ""       # why not, or that the member is optional


def choose(source: str | None, available: Callable[[str], bool]) -> Choice:
    """Pure: the real member for a cell's model source, or why the stand-in stays."""
    if not source:
        return Choice("", "no model", False, "the cell loads no model")
    if not needs_standin(str(source)):
        return Choice("", str(source), False, "a local/embedded model already (as configured)")
    family = standin_spec(str(source)).architecture
    if family not in MEMBERS:
        return Choice(family, STANDIN_NO_MEMBER, False)
    member, optional = MEMBERS[family]
    if not available(member):
        hint = " (optional: `make setup-ladder` installs it)" if optional else ""
        return Choice(family, f"stand-in (embedded member {member} not installed){hint}",
                      False, f"{member} not installed")
    return Choice(family, member, True, "optional member (make setup-ladder)" if optional
                  else "")


@lru_cache(maxsize=8)
def member_config(member: str) -> dict:
    """The member's conf/model/<member>.yaml fields that say what is loaded (MEMBER_FIELDS)."""
    path = CONF_DIR / "model" / f"{member}.yaml"
    if not path.exists():
        raise ConfigError(f"real rehearsal member {member!r} has no {path}: fix MEMBERS in "
                          f"ragrepro/rehearsal/real.py.")
    node = OmegaConf.load(path)
    return {k: node[k] for k in MEMBER_FIELDS if k in node}


def member_installed(member: str) -> bool:
    """Whether the member's embedded files are installed (its asset getter finds them)."""
    name = str(member_config(member)["source"]).split(":", 1)[1]
    try:
        return assets.EMBEDDED[name]().exists()
    except (RagreproError, KeyError, OSError):
        return False


def real_overrides(cfg: DictConfig,
                   available: Callable[[str], bool] | None = None) -> dict[str, object]:
    """{dotted key: value} that make the cell load its family's real member ({} when none).
    The member loads in float32 (its GGUF is dequantised to float32; CPU half precision is
    slow and not what the real run measures), and the row names what ran."""
    source = OmegaConf.select(cfg, "model.source", default=None)
    choice = choose(source, available or member_installed)
    if not choice.real:
        return {}
    fields = member_config(choice.used)
    out: dict[str, object] = {f"model.{k}": v for k, v in fields.items() if k != "name"}
    out["model.name"] = f"{fields['name']} (real, for {OmegaConf.select(cfg, 'model.name')})"
    out["dtype"] = "float32"
    return out
