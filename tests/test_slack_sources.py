"""Sources a person can open, end to end: documents ingested with their addresses and
anchors, a question through the real HTTP server, and the cited source a Slack link."""

from __future__ import annotations

import re

import pytest

from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from tests.slack_harness import block_text, mention, one_answer
from tests.test_ingest_links import SPHINX_LIKE

TEMPLATE = "https://wiki.example.com/docs/{path}"


@pytest.fixture()
def linked_store(tmp_path, test_embedder):
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "install.html").write_text(SPHINX_LIKE)
    (docs / "travel.md").write_text(
        "---\nurl: https://intranet.example.com/travel?lang=en&view=full\n---\n"
        "# Travel & expenses\n\n## Taxis <late>\n\nTaxis after midnight are paid back within a week.\n")
    (docs / "kitchen.md").write_text("# Kitchen\n\n## Descaling\n\nDescale the office kettle on Fridays.\n")
    store = EmbeddedStore(tmp_path / "store")
    summary = ingest([docs], store, test_embedder, progress=False, source_url=TEMPLATE)
    assert summary.skipped == [] and summary.warnings == []
    yield store
    store.close()


def _sources(blocks: list[dict]) -> list[str]:
    """The lines of the message's Sources section."""
    (section,) = [b["text"]["text"] for b in blocks
                  if b["type"] == "section" and b["text"]["text"].startswith("*Sources*\n")]
    return section.split("\n")[1:]


@pytest.mark.parametrize(("question", "expected"), [
    ("How do I install the kettle with pip and wait for the whistle?",
     ("<https://kettle.example.org/en/latest/install.html#with-pip|[1] guide/install.html — "
      "Installing › With pip>")),
    # A chunk that joins the page's three short sections: cited under the one quoted.
    ("Behind a proxy, which variable do I set first?",
     ("<https://kettle.example.org/en/latest/install.html#with-pip|[1] guide/install.html — "
      "Installing › With pip › Behind a proxy>")),
    ("Are taxis after midnight paid back within a week?",
     ("<https://intranet.example.com/travel?lang=en&amp;view=full|[1] travel.md — "
      "Travel &amp; expenses › Taxis &lt;late&gt;>")),
    ("When do we descale the office kettle?",
     "<https://wiki.example.com/docs/kitchen.md|[1] kitchen.md — Kitchen › Descaling>"),
])
def test_a_cited_source_is_a_link_to_its_page_and_heading(standin, start_bot, linked_store,
                                                         question, expected):
    h = start_bot(linked_store, source_url=TEMPLATE)
    event = mention(standin, question)
    assert h.sender.event(event).status == 200
    h.drain()
    message, turn_id = one_answer(standin, event)
    text = block_text(message["blocks"])
    assert "[1]" in text.split("*Sources*")[0]  # the answer cites passage 1
    sources = _sources(message["blocks"])
    assert sources[0] == expected
    for line in sources:  # every source line is one whole link, never a broken one
        assert re.fullmatch(r"<https://[^\s<>|]+\|[^<>|]+>", line), line
    logged = h.components.turnlog.get_turn(turn_id)
    link = expected[1:].split("|", 1)[0].replace("&amp;", "&")
    assert logged["passages"][0]["url"] == link  # the turn log holds the link it showed
    assert [c["url"] for c in logged["citations"] if c["marker"] == "[1]"] == [link]
