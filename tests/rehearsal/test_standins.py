"""Stand-in models: the same transformers architecture class and tokenizer type as the real
checkpoints (facts from each checkpoint's config.json), built locally and loadable by the
loaders' own from_pretrained calls."""
from pathlib import Path

import pytest
import yaml

from ragrepro import rehearsal
from ragrepro.configcheck import config_dirs, group_options, option_file
from ragrepro.errors import ConfigError
from ragrepro.models.loading import resolve_source
from ragrepro.rehearsal.standins import needs_standin, standin_dir, standin_spec

# hub id -> `architectures` in its config.json and the tokenizer class it loads with
REAL = {
    "gpt2-xl": ("GPT2LMHeadModel", "GPT2TokenizerFast"),
    "facebook/opt-66b": ("OPTForCausalLM", "GPT2TokenizerFast"),
    "EleutherAI/gpt-neo-2.7B": ("GPTNeoForCausalLM", "GPT2TokenizerFast"),
    "EleutherAI/gpt-j-6b": ("GPTJForCausalLM", "GPT2TokenizerFast"),
    "huggyllama/llama-30b": ("LlamaForCausalLM", "LlamaTokenizerFast"),
    "meta-llama/Llama-2-7b-hf": ("LlamaForCausalLM", "LlamaTokenizerFast"),
    "google/flan-t5-xl": ("T5ForConditionalGeneration", "T5TokenizerFast"),
    "google/t5_xxl_true_nli_mixture": ("T5ForConditionalGeneration", "T5TokenizerFast"),
    "roberta-base": ("RobertaModel", "RobertaTokenizerFast"),
    "bert-base-uncased": ("BertModel", "BertTokenizerFast"),
    "facebook/contriever": ("BertModel", "BertTokenizerFast"),
    "facebook/dpr-question_encoder-single-nq-base": ("DPRQuestionEncoder",
                                                     "DPRQuestionEncoderTokenizerFast"),
    "facebook/dpr-ctx_encoder-single-nq-base": ("DPRContextEncoder",
                                                "DPRContextEncoderTokenizerFast"),
    "tau/spider": ("DPRContextEncoder", "DPRContextEncoderTokenizerFast"),
}


def _conf_sources() -> set[str]:
    """Every hub model id a config names (models, retriever encoders, rerankers, AutoAIS)."""
    out = set()
    for path in (p for d in config_dirs() for p in d.rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            key, _, value = line.strip().partition(":")
            value = value.split("#")[0].strip().strip("'\"")
            if key in ("source", "doc_source") and "/" in value or key == "source" and value in (
                    "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "roberta-base",
                    "bert-base-uncased"):
                out.add(value)
    for p in (option_file("experiment", e) for e in group_options("experiment")
              if e.startswith("riches/paper/")):
        cfg = yaml.safe_load(p.read_text())
        model = ((cfg.get("riches") or {}).get("autoais") or {}).get("model")
        if model:
            out.add(model)
    return {s for s in out if needs_standin(s) and not s.startswith("$")}


@pytest.mark.parametrize("source", sorted(REAL))
def test_spec_matches_the_real_checkpoint(source):
    spec = standin_spec(source)
    assert (spec.architecture, spec.tokenizer) == REAL[source]


def test_every_hub_model_a_config_names_has_a_stand_in():
    sources = _conf_sources()
    assert {"facebook/opt-66b", "huggyllama/llama-30b", "google/flan-t5-xl",
            "facebook/dpr-ctx_encoder-single-nq-base", "roberta-base",
            "google/t5_xxl_true_nli_mixture"} <= sources
    for s in sources:
        standin_spec(s)  # raises ConfigError when one is missing


def test_unknown_hub_model_is_a_clear_error():
    with pytest.raises(ConfigError, match="HUB_MODELS"):
        standin_spec("someone/new-model")


def test_local_models_are_never_swapped(tmp_path):
    assert not needs_standin("embedded:smollm2")
    assert not needs_standin(str(tmp_path))
    assert not needs_standin("/x/model.gguf")
    assert needs_standin("facebook/opt-125m")


@pytest.mark.parametrize("source,first,last", [
    ("facebook/opt-125m", "</s>", None),    # OPT's tokenizer prepends </s> as BOS
    ("huggyllama/llama-7b", "<s>", None),   # LLaMA adds <s>
    ("google/flan-t5-xl", None, "</s>"),    # T5 appends </s>
    ("bert-base-uncased", "[CLS]", "[SEP]"),
    ("roberta-base", "<s>", "</s>"),
])
def test_built_stand_in_loads_with_the_real_classes(tmp_path, source, first, last):
    import transformers as tf

    folder = standin_dir(source, tmp_path)
    config = tf.AutoConfig.from_pretrained(folder)
    tok = tf.AutoTokenizer.from_pretrained(folder)
    arch, tok_cls = REAL.get(source, (standin_spec(source).architecture,
                                      standin_spec(source).tokenizer))
    assert config.architectures == [arch]
    # transformers 5 names the fast classes without the suffix
    assert type(tok).__name__ in (tok_cls, tok_cls.removesuffix("Fast"))
    ids = tok("The Moon orbits Earth.").input_ids
    toks = tok.convert_ids_to_tokens(ids)
    assert first is None or toks[0] == first
    assert last is None or toks[-1] == last
    assert config.hidden_size <= 64 if hasattr(config, "hidden_size") else True


def test_riches_markers_tokenise_apart_on_llama_stand_in(tmp_path):
    """The RICHES marker check (close marker's first token not in the open marker) held on
    the real LLaMA vocabulary; the first stand-ins broke it (found by the rehearsal)."""
    import transformers as tf

    tok = tf.AutoTokenizer.from_pretrained(standin_dir("meta-llama/Llama-2-7b-hf", tmp_path))
    open_ids = tok(" <<", add_special_tokens=False).input_ids
    close_ids = tok(" >>", add_special_tokens=False).input_ids
    assert close_ids[0] not in open_ids


@pytest.mark.slow  # a real embedded model
def test_resolve_source_uses_the_stand_in_only_while_rehearsing(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path))
    monkeypatch.delenv("RAGREPRO_DATA", raising=False)  # activate() sets it
    assert resolve_source("gpt2") == ("gpt2", False)
    rehearsal.activate(tmp_path / "fixtures")
    try:
        path, local = resolve_source("gpt2")
        assert local and Path(path).parent == tmp_path / "standins"
        assert resolve_source("embedded:smollm2")[0] != path
    finally:
        rehearsal.deactivate()
