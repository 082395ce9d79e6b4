"""make setup's installer (scripts/pyinstall.py): pip's index settings handed to uv."""
import pytest

from scripts import pyinstall

LISTED = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple https://mirror.example/simple'
global.find-links='/old/wheels'
site.index-url="https://site.example/simple"
"""


def test_pip_settings_read_as_pip_does():
    s = pyinstall.pip_settings(LISTED)
    # the PIP_FIND_LINKS variable replaces the file's value; a list splits on spaces
    assert s == {"find-links": ["/opt/wheels"], "constraint": ["/etc/xdg/pip/constraints.txt"],
                 "extra-index-url": ["file:///opt/pypi/simple", "https://mirror.example/simple"],
                 "index-url": ["https://site.example/simple"]}
    assert pyinstall.pip_settings("global.index-url='a'\nuser.index-url='b'") == {
        "index-url": ["b"]}  # a later file wins
    assert pyinstall.pip_settings("global.timeout='60'\nnot a setting") == {}


def test_uv_flags_leave_out_local_folders_this_machine_lacks():
    s = pyinstall.pip_settings(LISTED)
    present = {"/opt/wheels", "/etc/xdg/pip/constraints.txt"}
    flags = pyinstall.uv_flags(s, exists=present.__contains__)
    assert flags == ["--find-links", "/opt/wheels",
                     "--constraint", "/etc/xdg/pip/constraints.txt",
                     "--extra-index-url", "https://mirror.example/simple",
                     "--index-url", "https://site.example/simple"]
    assert pyinstall.local_path("file:///opt/x") == "/opt/x"
    assert pyinstall.local_path("https://h/x") is None
    assert pyinstall.local_path("rel/dir") == "rel/dir"


def test_uv_gets_pips_certificate_unless_one_is_set(monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    assert pyinstall.uv_env(LISTED)["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt"
    monkeypatch.setenv("SSL_CERT_FILE", "/mine.pem")
    assert pyinstall.uv_env(LISTED)["SSL_CERT_FILE"] == "/mine.pem"


def test_falls_back_to_pip_when_uv_fails(monkeypatch):
    calls = []
    monkeypatch.setattr(pyinstall, "have_uv", lambda py: True)
    monkeypatch.setattr(pyinstall, "pip_config_list", lambda py: LISTED)
    monkeypatch.setattr(pyinstall, "run", lambda cmd, env=None: calls.append(cmd) or (
        1 if "uv" in cmd else 0))
    assert pyinstall.install(["-e", ".[dev]"], "uv") == 0
    assert calls[0][2:4] == ["uv", "pip"] and "unsafe-best-match" in calls[0]
    assert calls[1][2:5] == ["pip", "install", "-q"] and calls[1][-2:] == ["-e", ".[dev]"]
    calls.clear()
    assert pyinstall.install(["x"], "pip") == 0 and len(calls) == 1 and "uv" not in calls[0]


def test_needs_something_to_install():
    with pytest.raises(SystemExit):
        pyinstall.main(["--installer", "pip", "--"])
