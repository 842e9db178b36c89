"""Links written in answer text never reach Slack as links whose target a person cannot see,
through the real HTTP server, the Web API stand-in and the Anthropic stand-in (official
SDKs): a model's answer writing hidden-target links (Markdown inline and reference links,
images, Slack's <address|words>, autolinks) and an extractive answer quoting a document that
holds one arrive with every address visible, in the markdown block, the mrkdwn fallback,
the streamed chunks and the ephemeral and shared posts; the only links are the sources
(CITEBOT_SOURCE_URL); a quotation holding such a link is still found in its source.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from bot.answer.checks import quote_in
from bot.answer.textlinks import visible_links
from bot.slack.render import ACTION_SHARE, ACTION_WHY
from bot.testing import slack_streams
from bot.testing.anthropic_standin import (
    AnthropicStandIn,
    RecordedRequest,
    message,
    passages_in,
    running,
)
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from tests.slack_harness import CHANNEL, block_text, bot_replies, buttons, mention

SOURCE_URL = "https://wiki.example.com/{path}"
EVIL = "https://evil.example.com"
SSO_DOC = (
    "# Signing in\n\n"
    "To sign in, open [the official wiki](https://evil.example.com/sso) and enter your badge "
    "number at the prompt.\n\n"
    "The helpdesk answers at <https://evil.example.com/help|the helpdesk page> on weekdays.\n")
QUESTION = "How do I sign in with my badge number?"
QUOTED = "open [the official wiki](https://evil.example.com/sso) and enter your badge number"


@pytest.fixture()
def sso_store(tmp_path, test_embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "sso.md").write_text(SSO_DOC, encoding="utf-8")
    (docs / "parking.md").write_text("# Parking\n\nStaff park in the north lot.\n", encoding="utf-8")
    store = EmbeddedStore(tmp_path / "store")
    assert ingest([docs], store, test_embedder, progress=False).documents == 2
    yield store
    store.close()


@pytest.fixture()
def anthropic() -> Iterator[AnthropicStandIn]:
    with running() as s:
        yield s


def hidden_links(text: str) -> list[str]:
    """Every place in Slack text where a link's target could hide behind other words: a
    Markdown inline link or image, a reference definition, or a Slack link or autolink that
    is not one of citebot's sources."""
    found = re.findall(r"\]\(", text)
    found += re.findall(r"(?m)^ {0,3}\[[^\[\]]+\]:", text)
    found += [m for m in re.findall(r"<([^<>|]*)(?:\|[^<>]*)?>", text)
              if not m.startswith(("https://wiki.example.com/", "@", "#", "!"))]
    return found


def everything_sent(standin) -> list[str]:
    """Every text citebot sent Slack: message texts, blocks, streamed chunks, response_url posts."""
    out = []
    for call in standin.calls():
        p = call.params
        out += [str(p.get("text") or ""), block_text(p.get("blocks") or []),
                slack_streams.stream_text(p)]
    return [t for t in out if t]


def model_answer(request: RecordedRequest) -> str:
    (n,) = [n for n, text in passages_in(request).items() if "badge number" in text]
    return (f"To sign in, open [the official wiki]({EVIL}/sso) [{n}]. "
            f'The page says to "{QUOTED}" [{n}]. '
            f"Help is at <{EVIL}/help|the helpdesk> [{n}] and ![status]({EVIL}/pixel.gif) [{n}]. "
            f"See [the guide][g] and [{n}] for more [{n}].\n\n[g]: {EVIL}/guide\n[{n}]: {EVIL}/cite")


def start(start_bot, store, anthropic=None):
    keys = {} if anthropic is None else {
        "anthropic_api_key": "sk-ant-test-links", "anthropic_base_url": anthropic.base_url,
        "anthropic_timeout_s": 5.0, "anthropic_budget_s": 10.0}
    return start_bot(store, source_url=SOURCE_URL, **keys)


@pytest.mark.slow
def test_a_models_hidden_links_arrive_with_their_addresses_streamed_and_whole(
        standin, start_bot, sso_store, anthropic):
    h = start(start_bot, sso_store, anthropic)
    anthropic.always(lambda request: message(model_answer(request)))
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    streamed = [slack_streams.stream_text(c.params) for c in standin.calls()
                if c.method in ("chat.startStream", "chat.appendStream", "chat.stopStream")]
    assert len([s for s in streamed if s]) >= 2, streamed  # it did stream, piece by piece
    (reply,) = bot_replies(standin, CHANNEL, event["ts"])
    shown = reply["text"]
    assert "the official wiki (https://evil.example.com/sso)" in shown
    assert "the helpdesk (https://evil.example.com/help)" in shown
    assert "status (https://evil.example.com/pixel.gif)" in shown
    assert "g: https://evil.example.com/guide" in shown  # the definition, as text
    assert hidden_links("".join(streamed)) == [] and hidden_links(shown) == []
    for text in everything_sent(standin):
        assert hidden_links(text) == [], text
    turn = h.components.turnlog.get_turn(buttons(reply["blocks"])[ACTION_WHY])
    assert turn["composer"] == "claude"
    (quote,) = turn["quotes"]
    assert quote["text"] == QUOTED and quote["verified"] is True  # found in the source as written
    assert "<https://wiki.example.com/sso.md" in block_text(reply["blocks"])  # the source: a link
    assert f"]({EVIL}/sso)" in turn["answer"]  # the turn log keeps what the model wrote


@pytest.mark.slow
def test_ask_and_share_of_a_models_answer_show_every_address(standin, start_bot, sso_store,
                                                            anthropic):
    h = start(start_bot, sso_store, anthropic)
    anthropic.always(lambda request: message(model_answer(request)))
    h.sender.command(QUESTION, user="UALICE", channel=CHANNEL,
                     response_url=standin.response_url("ask"))
    h.drain()
    (answer,) = [c for c in standin.calls("response_url") if c.path == "/response/ask"]
    assert answer.params["blocks"][1]["type"] == "markdown"
    turn_id = buttons(answer.params["blocks"])[ACTION_SHARE]
    h.sender.action(ACTION_SHARE, turn_id, user="UALICE", channel=CHANNEL,
                    response_url=standin.response_url("share"), ephemeral=True)
    h.drain()
    shared = next(c for c in standin.calls("response_url") if c.path == "/response/share")
    assert shared.params["response_type"] == "in_channel"
    for call in (answer, shared):
        text = block_text(call.params["blocks"])
        assert "the official wiki (https://evil.example.com/sso)" in text
        assert hidden_links(text) == [] and hidden_links(call.params["text"]) == []


@pytest.mark.slow
def test_an_extractive_answer_quoting_a_documents_link_shows_its_address(standin, start_bot,
                                                                        sso_store):
    h = start(start_bot, sso_store)
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    (reply,) = bot_replies(standin, CHANNEL, event["ts"])
    turn = h.components.turnlog.get_turn(buttons(reply["blocks"])[ACTION_WHY])
    assert turn["composer"] == "extractive" and "evil.example.com/sso" in turn["answer"]
    assert turn["quotes"] and all(q["verified"] for q in turn["quotes"])
    text = block_text(reply["blocks"])
    assert "the official wiki (https://evil.example.com/sso)" in text
    for sent in everything_sent(standin):
        assert hidden_links(sent) == [], sent
    assert re.search(r"<https://wiki\.example\.com/sso\.md[^|>]*\|\[1\]", text)  # the source


# -- the rule itself ----------------------------------------------------------------------------
@pytest.mark.parametrize(("written", "shown"), [
    ("[the wiki](https://evil.example.com/sso)", "the wiki (https://evil.example.com/sso)"),
    ('[the wiki](<https://evil.example.com/a b> "Title")', "the wiki (https://evil.example.com/a b)"),
    ("![pixel](https://evil.example.com/p.gif)", "pixel (https://evil.example.com/p.gif)"),
    ("<https://evil.example.com|the wiki>", "the wiki (https://evil.example.com)"),
    ("<https://evil.example.com>", "https://evil.example.com"),
    ("<mailto:it@evil.example.com|IT>", "IT (mailto:it@evil.example.com)"),
    ("[a [b](https://x.example) c](https://y.example)", "a b (https://x.example) c (https://y.example)"),
    ("[g]: https://evil.example.com/guide", "g: https://evil.example.com/guide"),
    ("[1]: https://evil.example.com", "1: https://evil.example.com"),
    (" wiki. Really](https://evil.example.com)", " wiki. Really] (https://evil.example.com)"),
    (" b]: https://evil.example.com", " b] : https://evil.example.com"),
    ("go to https://wiki.example.com\u202e/moc.live", "go to https://wiki.example.com/moc.live"),
    ("Every train [1] leaves [2]: on time.", "Every train [1] leaves [2]: on time."),
])
def test_every_link_form_is_shown_as_words_and_address(written, shown):
    assert visible_links(written) == shown
    assert visible_links(shown) == shown  # shown once is shown


def test_a_quotation_holding_a_link_is_found_as_written_and_as_shown():
    source = SSO_DOC
    assert quote_in(QUOTED, source)
    assert quote_in("open the official wiki (https://evil.example.com/sso) and enter", source)
    assert not quote_in("open the official wiki (https://wiki.example.com/sso) and enter", source)
    assert not quote_in("open [the official wiki](https://evil.example.com/login)", source)
