"""Fuzz: source-name validation (ingest/names.py) and discovery over arbitrary file names.

A name that is accepted is UTF-8 and one line, free of controls and bidi controls; a name
refused is shown as one printable line that reads back as the name (or its bytes); and
discovery, over a file of any name the file system allows, never raises and never finds
a file under a name the validation refuses.
"""

from __future__ import annotations

import ast
import os
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.discovery import discover
from ingest.names import REFUSED_CHARACTERS, name_refusal, shown
from tests.fuzz_support import FUZZ_SETTINGS, within_budget

pytestmark = pytest.mark.fuzz

# Text of every kind (surrogates too: what a name that is not UTF-8 decodes to), weighted
# towards the characters the validation is about.
_SPECIAL = st.sampled_from(sorted(REFUSED_CHARACTERS) + ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\x9b",
                                                         "\u200b", "\u200d", "\ufeff", "é", "/", "."])
NAMES = st.one_of(
    st.text(alphabet=st.one_of(st.characters(), _SPECIAL), max_size=60),
    st.text(alphabet=st.characters(codec=None), max_size=20_000),
    st.binary(max_size=80).map(os.fsdecode),  # bytes from disk, undecodable ones as surrogates
)
# What a file name on Linux may be: any bytes but "/" and NUL, not "." or "..".
FILE_NAMES = st.binary(min_size=1, max_size=60).map(lambda b: b.replace(b"/", b"_").replace(b"\0", b"_")).filter(
    lambda b: b not in (b".", b".."))


def _accepted_is_clean(name: str) -> None:
    name.encode("utf-8")
    assert len(name.splitlines()) <= 1
    assert not any(ch in REFUSED_CHARACTERS or unicodedata.category(ch) in ("Cc", "Cs") for ch in name)
    assert shown(name) == name


def _refused_is_shown_escaped(name: str, reason: str) -> None:
    escaped = shown(name)
    assert escaped.isprintable() and escaped in reason and reason.isprintable()
    back = ast.literal_eval(escaped)
    assert back == (os.fsencode(name) if isinstance(back, bytes) else name)


@FUZZ_SETTINGS
@given(NAMES)
def test_a_name_is_accepted_clean_or_refused_with_itself_escaped(name):
    reason = within_budget(lambda: name_refusal(name))
    if reason is None:
        _accepted_is_clean(name)
    else:
        _refused_is_shown_escaped(name, reason)


@FUZZ_SETTINGS
@given(FILE_NAMES)
def test_discovery_never_raises_and_finds_only_acceptable_names(raw):
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        (docs / "sub").mkdir(parents=True)
        (docs / "good.md").write_text("# Good\n\nThe rover docks.\n")
        for where in (os.fsencode(docs), os.fsencode(docs / "sub")):
            with open(os.path.join(where, raw), "wb") as out:
                out.write(b"# X\n\ntext\n")
        found, skipped = within_budget(lambda: discover([docs]))
    sources = {f.source for f in found}
    assert "good.md" in sources
    assert all(name_refusal(s) is None for s in sources)
    assert all(s.source.isprintable() and s.reason.isprintable() for s in skipped)
    name = os.fsdecode(raw)
    if name.startswith("."):
        assert sources == {"good.md"} and skipped == []  # hidden
    elif name_refusal(name) is None:
        assert sources == {"good.md", name, f"sub/{name}"} and skipped == []
    else:
        assert sources == {"good.md"} and len(skipped) == 2
