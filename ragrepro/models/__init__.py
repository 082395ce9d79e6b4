"""Language models: loading (hub, local folder, GGUF), scoring and generation."""
from .lm import LM, load_lm  # noqa: F401
