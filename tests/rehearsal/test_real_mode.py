"""Real-model rehearsal (`rehearsal.real_models=true`, `make rehearse-real`): which cells get
the family's real embedded member, that their budgets stay uncapped, and that a flagged
diagnostic fails a cell with the flag named. No model is loaded here."""
import csv

import pytest
from hydra import compose, initialize_config_dir

from ragrepro.paths import CONF_DIR
from ragrepro.rehearsal import real
from ragrepro.rehearsal.cells import (
    RealCellResult,
    flag_problem,
    merge_real,
    read_real_summary,
    write_real_summary,
)
from ragrepro.rehearsal.config import apply
from ragrepro.report.flags import load_rules


def installed(member: str) -> bool:
    return True


def missing(member: str) -> bool:
    return False


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_a_llama_family_cell_gets_smollm2_and_a_gpt2_cell_keeps_its_stand_in():
    llama = real.choose("meta-llama/Llama-2-7b-hf", installed)
    assert (llama.family, llama.used, llama.real) == ("LlamaForCausalLM", "smollm2-135m", True)
    assert real.choose("huggyllama/llama-30b", installed).used == "smollm2-135m"
    gpt2 = real.choose("gpt2-xl", installed)
    assert (gpt2.family, gpt2.used, gpt2.real) == ("GPT2LMHeadModel",
                                                   "stand-in (no embedded member)", False)
    for source in ("facebook/opt-66b", "EleutherAI/gpt-j-6b", "google/flan-t5-xl"):
        assert real.choose(source, installed).used == real.STANDIN_NO_MEMBER
    # a member that is not installed keeps the stand-in and says which member is missing
    absent = real.choose("huggyllama/llama-7b", missing)
    assert not absent.real and "smollm2-135m not installed" in absent.used
    assert real.choose("embedded:smollm2", installed).real is False  # already real


def test_every_member_is_a_model_config_of_its_family():
    for family, (member, optional) in real.MEMBERS.items():
        fields = real.member_config(member)
        assert str(fields["source"]).startswith("embedded:"), family
        assert optional == (member.startswith("qwen")), family  # only the ladder is opt-in


def test_real_mode_swaps_the_llama_cell_and_leaves_its_budgets_uncapped(tmp_path, monkeypatch):
    monkeypatch.setattr(real, "member_installed", installed)
    cfg = _compose("experiment=riches/paper/main", "rehearsal=cpu", "rehearsal.real_models=true")
    assert cfg.riches.max_new_tokens == 160
    apply(cfg, tmp_path, tmp_path / "results")
    assert cfg.model.source == "embedded:smollm2" and cfg.model.add_bos is False
    assert cfg.model.name == "smollm2-135m (real, for llama2-7b)"
    assert cfg.dtype == "float32"
    assert cfg.riches.max_new_tokens == 160        # not the stand-in cap of 16
    assert "uncapped" not in cfg.rehearsal
    assert cfg.results_dir == str(tmp_path / "results" / "rehearsal" / "real")


def test_real_mode_keeps_the_gpt2_cell_on_its_capped_stand_in(tmp_path, monkeypatch):
    monkeypatch.setattr(real, "member_installed", installed)
    cfg = _compose("experiment=ralm/paper/fig3", "rehearsal=cpu", "rehearsal.real_models=true",
                   "model=gpt2-xl")
    apply(cfg, tmp_path, tmp_path / "results")
    assert cfg.model.source == "gpt2-xl" and cfg.model.name == "gpt2-xl (stand-in)"


def test_a_flagged_diagnostic_fails_a_real_cell_with_the_flag_named():
    rules = load_rules()
    length = next(r for r in rules if r.name == "length")
    metrics = {"em": 0.5, "gen_answer_length": 1.0, "gen_answer_empty": 0.0,
               "gen_answer_truncated": 0.0}
    assert flag_problem(metrics, real=True) == ("length 100%", "flagged: length 100%")
    # the same row from a random stand-in is reported, not failed: its flags mean nothing
    assert flag_problem(metrics, real=False) == ("length 100%", "")
    below = {"gen_answer_length": length.at_least / 2}
    assert flag_problem(below, real=True) == ("", "")
    assert flag_problem({"em": 0.0}, real=True) == ("", "")  # no diagnostics: nothing to read


def test_run_real_cell_fails_a_flagged_cell_from_a_fake_pipeline_result(monkeypatch):
    import ragrepro.runner
    from scripts import rehearse

    monkeypatch.setattr(real, "member_installed", installed)
    fake = {"em": 0.0, "gen_filter_length": 1.0, "gen_answer_length": 0.5,
            "diag_ctx_empty": 0.0}
    monkeypatch.setattr(ragrepro.runner, "execute", lambda cfg: fake)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        r = rehearse.run_real_cell("filco/paper/table4",
                                   ["model=llama2-7b", "dataset=nq-open",
                                    "filco.measure=strinc"], ["limit=2"])
        gpt2 = rehearse.run_real_cell("ralm/paper/fig3", ["model=gpt2"], ["limit=2"])
    assert (r.family, r.model_used, r.status) == ("LlamaForCausalLM", "smollm2-135m", "failed")
    assert r.error == "flagged: length 50% (answer); length 100% (filter)"
    assert (gpt2.model_used, gpt2.status, gpt2.error) == (real.STANDIN_NO_MEMBER, "ok", "")


def test_real_summary_lists_every_cell_with_its_model_and_flags(tmp_path):
    rows = [RealCellResult("riches/paper/main", "dataset=nq-open", "LlamaForCausalLM",
                           "smollm2-135m", "failed", 12.0, "length 100%",
                           "flagged: length 100%", real=True),
            RealCellResult("ralm/paper/fig3", "model=gpt2", "GPT2LMHeadModel",
                           real.STANDIN_NO_MEMBER, "ok", 1.0)]
    write_real_summary(rows, tmp_path, 13.0)
    with open(tmp_path / "real_summary.csv", encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    assert [(g["model_used"], g["status"], g["flags"]) for g in got] == [
        ("smollm2-135m", "failed", "length 100%"), (real.STANDIN_NO_MEMBER, "ok", "")]
    md = (tmp_path / "real_summary.md").read_text(encoding="utf-8")
    assert "1 of 2 cells ok, 1 failed; 1 ran a real model" in md
    assert "`riches/paper/main` `dataset=nq-open`: flagged: length 100%" in md


@pytest.mark.parametrize("cell", [["model=flan-t5-xl", "dataset=nq-open"]])
def test_a_t5_cell_keeps_its_stand_in(cell, tmp_path, monkeypatch):
    monkeypatch.setattr(real, "member_installed", installed)
    cfg = _compose("experiment=filco/paper/table4", "rehearsal=cpu",
                   "rehearsal.real_models=true", *cell)
    assert real.real_overrides(cfg) == {}


def test_append_replaces_a_rerun_cell_and_keeps_the_others(tmp_path):
    a = RealCellResult("riches/paper/main", "dataset=nq-open", "LlamaForCausalLM",
                       "smollm2-135m", "failed", 10.0, "length 50%", "flagged: length 50%",
                       real=True)
    b = RealCellResult("ralm/paper/fig3", "model=gpt2", "GPT2LMHeadModel",
                       real.STANDIN_NO_MEMBER, "ok", 1.0)
    write_real_summary([a, b], tmp_path, 11.0)
    earlier = read_real_summary(tmp_path / "real_summary.csv")
    assert [r.real for r in earlier] == [True, False] and earlier[0].seconds == 10.0
    rerun = RealCellResult(a.experiment, a.cell, a.family, a.model_used, "ok", 12.0, real=True)
    new = RealCellResult("ralm/paper/fig8", "qa.num_docs=0", "LlamaForCausalLM",
                         "smollm2-135m", "ok", 3.0, real=True)
    merged = merge_real(earlier, [rerun, new])
    assert [(r.experiment, r.status, r.seconds) for r in merged] == [
        ("riches/paper/main", "ok", 12.0), ("ralm/paper/fig3", "ok", 1.0),
        ("ralm/paper/fig8", "ok", 3.0)]
