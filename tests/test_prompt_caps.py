"""Nothing sent to the model is unbounded: a store holding a huge chunk (as one built
before the chunker's character cap holds it) still gives the model a prompt within its caps."""

from __future__ import annotations

from pathlib import Path

from bot.answer.claude import ClaudeComposer
from bot.answer.passages import Passage
from bot.answer.prompt import (
    PROMPT_PASSAGE_CHARS,
    PROMPT_QUESTION_CHARS,
    PROMPT_USER_CHARS,
    answer_prompt,
    condense_prompt,
    cut_to,
    judge_prompt,
)
from bot.memory.state import PriorTurn
from bot.settings import load_settings
from bot.testing.anthropic_standin import message, passages_in, running
from bot.wiring import Components
from ingest.chunker import ChunkingConfig
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from search.types import Chunk

API_KEY = "sk-ant-test-0123456789abcdef"
SENTENCE = "The Kestrel rover docks at bay seven before each shift and reports its battery. "


def _huge_store(root: Path, embedder) -> EmbeddedStore:
    docs = root / "docs"
    docs.mkdir()
    (docs / "kestrel.md").write_text("# Kestrel\n\n" + SENTENCE * 15_000 + "\n", encoding="utf-8")  # 1.2 M chars
    (docs / "other.md").write_text("# Other\n\nThe Kestrel rover is blue.\n", encoding="utf-8")
    store = EmbeddedStore(root / "store")
    # The chunker of old: no character cap, so the whole paragraph is one chunk.
    summary = ingest([docs], store, embedder, chunking=ChunkingConfig(max_chars=10**9), progress=False)
    assert summary.skipped == []
    assert max(len(c.text) for c in store.iter_chunks()) > 1_000_000
    return store


def test_a_huge_stored_chunk_reaches_the_model_within_the_caps(tmp_path, test_embedder):
    store = _huge_store(tmp_path, test_embedder)
    with running() as standin:
        settings = load_settings(anthropic_api_key=API_KEY, anthropic_base_url=standin.base_url,
                                 anthropic_model="claude-test-model", store=store.directory)
        components = Components(settings)
        components.__dict__.update(store=store, embedder=test_embedder)
        answerer = components.answerer
        assert isinstance(answerer.composer, ClaudeComposer)
        standin.script(message("The Kestrel rover docks at bay seven [1]."))
        answerer.ask("Where does the Kestrel rover dock before each shift?")
        (request,) = [r for r in standin.requests if "<passages>" in r.user_text]
    assert len(request.user_text) <= PROMPT_USER_CHARS
    given = passages_in(request)
    assert given and max(len(t) for t in given.values()) <= PROMPT_PASSAGE_CHARS
    assert any(t.startswith(SENTENCE.strip()) for t in given.values())


def _chunk(n: int, text: str) -> Chunk:
    return Chunk(f"c{n}", f"d{n}", f"doc{n}.md", ("H",), None, 0, text, 40)


def test_every_prompt_builder_caps_its_parts_and_the_whole():
    huge = "word " * 1_000_000
    passages = [Passage(n, _chunk(n, huge), huge) for n in range(1, 30)]
    prompt = answer_prompt(huge, passages, [], [])
    assert len(prompt.user) <= PROMPT_USER_CHARS
    assert prompt.user.count("<passage ") >= PROMPT_USER_CHARS // PROMPT_PASSAGE_CHARS - 1
    assert prompt.user.endswith("</question>") and len(prompt.user.split("<question>")[1]) <= PROMPT_QUESTION_CHARS + 11
    judged = judge_prompt(huge, [(n, huge) for n in range(1, 30)])
    assert len(judged.user) <= PROMPT_USER_CHARS
    condensed = condense_prompt(huge, [PriorTurn("t", huge, huge, huge)] * 5)
    assert len(condensed.user) <= 5 * PROMPT_QUESTION_CHARS


def test_a_cut_passage_starts_verbatim_and_says_it_was_cut():
    text = "alpha beta " * 5_000
    cut = cut_to(text, 1_000)
    assert len(cut) <= 1_000 and cut.endswith(" …") and text.startswith(cut[:-2])
    assert cut_to("short", 1_000) == "short"
