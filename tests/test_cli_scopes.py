"""`citebot search/ask --channel ID`: a channel's scope tried without Slack."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from bot.cli import cli

SCOPES = """\
[default]
sources = ["**/company/**"]
[channels.CENG]
sources = ["**/engineering/**"]
[channels.COFF]
reply = "off"
"""
# Oskar Brandvold is named only in engineering/ pages of the sample handbook.
QUESTION = "Who wrote the original bootloader, Oskar Brandvold?"


@pytest.fixture()
def runner(examples_store, monkeypatch, tmp_path):
    path = tmp_path / "scopes.toml"
    path.write_text(SCOPES, encoding="utf-8")
    monkeypatch.setenv("CITEBOT_STORE", str(examples_store.directory))
    monkeypatch.setenv("CITEBOT_SCOPES", str(path))
    return CliRunner()


def _json(output: str) -> dict:
    (line,) = [ln for ln in output.splitlines() if ln.startswith("{")]
    return json.loads(line)


def test_search_under_a_channel_scope_returns_only_its_sources(runner):
    whole = _json(runner.invoke(cli, ["search", QUESTION, "--json"]).stdout)
    assert "rare:brandvold" in whole["addresses"]
    eng = runner.invoke(cli, ["search", QUESTION, "--json", "--channel", "CENG"])
    assert eng.exit_code == 0, eng.output
    assert "scope channels.CENG: **/engineering/**" in eng.stderr
    hits = _json(eng.stdout)["hits"]
    assert hits and all("engineering/" in h["source"] for h in hits)
    general = _json(runner.invoke(cli, ["search", QUESTION, "--json", "--channel", "CGENERAL"]).stdout)
    assert all("company/" in h["source"] for h in general["hits"])
    assert general["addresses"] == [] and not general["support"]["addressed"]


def test_ask_under_a_channel_scope_records_it(runner):
    result = runner.invoke(cli, ["ask", QUESTION, "--json", "--channel", "CGENERAL"])
    assert result.exit_code == 0, result.output
    out = _json(result.stdout)
    assert all("company/" in p["source"] for p in out["passages"])
    off = runner.invoke(cli, ["search", QUESTION, "--channel", "COFF"])
    assert 'does not reply in this channel: reply = "off"' in off.stderr


def test_a_bad_scopes_file_fails_the_command_with_the_line(runner, tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text('[default]\nsources = ["**"]\n[channels.CENG]\nreply = "yes"\n', encoding="utf-8")
    monkeypatch.setenv("CITEBOT_SCOPES", str(bad))
    result = runner.invoke(cli, ["search", QUESTION, "--channel", "CENG"])
    assert result.exit_code != 0
    assert "line 4" in str(result.exception) and "reply" in str(result.exception)
