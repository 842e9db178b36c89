"""Sentence ends in scripts other than Latin (bot/answer/sentences.py): the marks of the
scripts that put a space after a sentence end one as "." does; Chinese and Japanese end one
at 。！？ with no space after. The checks, the streamed release and Slack's cuts read the
same ends, and the extractive composer quotes one such sentence, verified."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from bot.answer.checks import check_answer, cited_sentences
from bot.answer.compose import ExtractiveComposer, word_count
from bot.answer.passages import Passage
from bot.answer.release import settled_ends
from bot.answer.sentences import sentence_spans, split_sentences
from bot.slack.split import split_markdown, split_text
from search.types import Chunk


def spans(text: str, wrapped: bool = False) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text, wrapped=wrapped)]


# -- the marks ---------------------------------------------------------------------------

# Written for these tests: a team's leave and laptop rules, in each script.
HINDI = ("हर नए कर्मचारी को पहले दिन दफ़्तर की चाबी मिलती है। लैपटॉप आईटी डेस्क से लिया जाता है॥ "
         "क्या छुट्टी अगले साल तक जाती है? नहीं।")
URDU = "ہر نئے ملازم کو پہلے دن دفتر کی چابی ملتی ہے۔ لیپ ٹاپ آئی ٹی ڈیسک سے ملتا ہے۔ کیا چھٹی اگلے سال جاتی ہے؟ نہیں۔"
ARABIC = "هل يحصل الموظف الجديد على مفتاح المكتب؟ نعم، في اليوم الأول. يُستلم الحاسوب من مكتب الدعم."
PERSIAN = "آیا مرخصی به سال بعد منتقل می‌شود؟ خیر. کارمند جدید روز اول کلید دفتر را می‌گیرد."
ARMENIAN = "Նոր աշխատակիցը առաջին օրը ստանում է գրասենյակի բանալին։ Նոութբուքը տրվում է աջակցման բաժնից։"
ETHIOPIC = "አዲስ ሠራተኛ በመጀመሪያው ቀን የቢሮ ቁልፍ ይቀበላል። ፈቃድ ወደ ሚቀጥለው ዓመት ይተላለፋል፧ አይተላለፍም።"
BURMESE = "ဝန်ထမ်းသစ်သည် ပထမနေ့တွင် ရုံးသော့ကို ရရှိသည်။ လက်ပ်တော့ကို အိုင်တီဌာနမှ ထုတ်ပေးသည်။"
CHINESE = "新员工入职第一天会领到门禁卡。笔记本电脑由信息技术部统一配置！年假可以顺延吗？不可以。"
JAPANESE = "新入社員は初日に入館証を受け取ります。ノートパソコンは情報システム部が用意します！有給休暇は繰り越せますか？いいえ。"


@pytest.mark.parametrize("text, expected", [
    (HINDI, ["हर नए कर्मचारी को पहले दिन दफ़्तर की चाबी मिलती है।", "लैपटॉप आईटी डेस्क से लिया जाता है॥",
             "क्या छुट्टी अगले साल तक जाती है?", "नहीं।"]),
    (URDU, ["ہر نئے ملازم کو پہلے دن دفتر کی چابی ملتی ہے۔", "لیپ ٹاپ آئی ٹی ڈیسک سے ملتا ہے۔",
            "کیا چھٹی اگلے سال جاتی ہے؟", "نہیں۔"]),
    (ARABIC, ["هل يحصل الموظف الجديد على مفتاح المكتب؟", "نعم، في اليوم الأول.", "يُستلم الحاسوب من مكتب الدعم."]),
    (PERSIAN, ["آیا مرخصی به سال بعد منتقل می‌شود؟", "خیر.", "کارمند جدید روز اول کلید دفتر را می‌گیرد."]),
    (ARMENIAN, ["Նոր աշխատակիցը առաջին օրը ստանում է գրասենյակի բանալին։", "Նոութբուքը տրվում է աջակցման բաժնից։"]),
    (ETHIOPIC, ["አዲስ ሠራተኛ በመጀመሪያው ቀን የቢሮ ቁልፍ ይቀበላል።", "ፈቃድ ወደ ሚቀጥለው ዓመት ይተላለፋል፧", "አይተላለፍም።"]),
    (BURMESE, ["ဝန်ထမ်းသစ်သည် ပထမနေ့တွင် ရုံးသော့ကို ရရှိသည်။", "လက်ပ်တော့ကို အိုင်တီဌာနမှ ထုတ်ပေးသည်။"]),
    (CHINESE, ["新员工入职第一天会领到门禁卡。", "笔记本电脑由信息技术部统一配置！", "年假可以顺延吗？", "不可以。"]),
    (JAPANESE, ["新入社員は初日に入館証を受け取ります。", "ノートパソコンは情報システム部が用意します！",
                "有給休暇は繰り越せますか？", "いいえ。"]),
], ids=["hindi", "urdu", "arabic", "persian", "armenian", "ethiopic", "burmese", "chinese", "japanese"])
def test_each_script_ends_its_sentences_at_its_own_marks(text, expected):
    assert spans(text) == expected
    assert spans(text, wrapped=True) == expected
    assert split_sentences(text) == expected


def test_the_spaced_marks_need_white_space_after_them_as_a_full_stop_does():
    # Sanskrit verse numbers sit between double dandas: "॥१॥" ends once, after the second.
    assert spans("धर्मक्षेत्रे कुरुक्षेत्रे॥१॥ अगला श्लोक।") == ["धर्मक्षेत्रे कुरुक्षेत्रे॥१॥", "अगला श्लोक।"]
    assert spans("एक।दो") == ["एक।दो"]
    # Closing quotes and brackets, a guillemet too, and [N] markers stay with the sentence.
    assert spans("उसने कहा «ठीक है।» [1] फिर वह गया।") == ["उसने कहा «ठीक है।» [1]", "फिर वह गया।"]
    assert spans("(यह नियम है।) [2][3] अगला।") == ["(यह नियम है।) [2][3]", "अगला।"]


def test_chinese_and_japanese_marks_end_a_sentence_with_no_space_after():
    # Closing brackets and quotes, a run of marks and [N] markers stay with the sentence.
    assert spans("他说：“可以。”下一句。") == ["他说：“可以。”下一句。"]  # the quotation runs on
    assert spans("通知：「完了しました。」\n次の手順。") == ["通知：「完了しました。」", "次の手順。"]
    assert spans("（详见附录。） 然后重启。") == ["（详见附录。）", "然后重启。"]
    assert spans("真的吗？！是的。") == ["真的吗？！", "是的。"]
    assert spans("年假二十天。[1]病假另计。 [2][3] 完。") == ["年假二十天。[1]", "病假另计。 [2][3]", "完。"]
    # 「保存しました。」と表示されます。 is one sentence: the quotation runs on into it.
    assert spans("「保存しました。」と表示されます。次へ。") == ["「保存しました。」と表示されます。", "次へ。"]
    # A straight quote after 。 opens the next sentence as often as it closes this one.
    assert spans('第一句。"第二句"。') == ["第一句。", '"第二句"。']
    # The full-width full stop ends one, but not as a decimal point, a list number or a host.
    assert spans("版本１．５已发布．请升级。") == ["版本１．５已发布．", "请升级。"]
    assert spans("见ｅｘａｍｐｌｅ．ｃｏｍ。１．概要") == ["见ｅｘａｍｐｌｅ．ｃｏｍ。", "１．概要"]


def test_mixed_latin_and_chinese():
    text = "使用 Redis 缓存会话。TTL 默认为 60 秒！See the runbook for details. 然后重启 quay-2.example.com 服务。"
    assert spans(text) == ["使用 Redis 缓存会话。", "TTL 默认为 60 秒！", "See the runbook for details.",
                           "然后重启 quay-2.example.com 服务。"]
    # ASCII marks keep the Latin rule: no end without white space after them.
    assert spans("版本 v1.2.3 已发布!请升级.") == ["版本 v1.2.3 已发布!请升级."]


def test_latin_sentences_end_as_before():
    assert spans("It is 1.4 billion. See e.g. the bay. Point it at quay-2.example.com first.") == [
        "It is 1.4 billion.", "See e.g. the bay.", "Point it at quay-2.example.com first."]
    assert spans('It leaves later." [2]. Next one.') == ['It leaves later." [2].', "Next one."]


def test_hard_wrapped_chinese_is_one_sentence_for_the_composer():
    # Chinese wrapped at 80 columns: 40 wide characters a line.
    line1 = "新员工入职第一天会领到门禁卡和一台笔记本电脑，笔记本电脑由信息技术部统一配置并安"
    line2 = "装好常用软件，请勿自行安装其他软件。年假二十天。"
    assert len(line1) == 40
    text = f"{line1}\n{line2}"
    assert spans(text, wrapped=True) == [f"{line1}\n装好常用软件，请勿自行安装其他软件。", "年假二十天。"]
    assert spans(text) == [line1, "装好常用软件，请勿自行安装其他软件。", "年假二十天。"]  # the checks cut at it


# -- the users of the ends: the checks, the streamed release, Slack's cuts ------------------

def test_citation_markers_after_a_danda_or_a_chinese_mark_belong_to_their_sentence():
    hindi = cited_sentences("हर कर्मचारी को बीस दिन मिलते हैं। [1] बीमारी की छुट्टी अलग है [2]।")
    assert [(c.text, c.numbers) for c in hindi] == [("हर कर्मचारी को बीस दिन मिलते हैं।", (1,)),
                                                    ("बीमारी की छुट्टी अलग है।", (2,))]
    chinese = cited_sentences("每年二十天年假。[1]病假另计[2]。文档说：“年假二十天。病假另计。” [1]")
    assert [(c.text, c.numbers) for c in chinese] == [("每年二十天年假。", (1,)), ("病假另计。", (2,)),
                                                      ("文档说：“年假二十天。病假另计。”", (1,))]


def test_a_straight_quotation_closed_after_a_chinese_mark_and_cited_ends_its_sentence():
    # The answer's quotation format ("exact words" [N]) in Chinese: the straight quote after
    # 。 closes the quotation when a marker follows it, so each quoted sentence is checked on
    # its own (the two ran into one sentence citing both, and nothing was released).
    answer = '根据政策，"员工每年有十五天假期。" [1] 另外，"病假需要证明。"[2]然后。'
    assert [(c.text, c.numbers) for c in cited_sentences(answer)] == [
        ('根据政策，"员工每年有十五天假期。"', (1,)), ('另外，"病假需要证明。"', (2,))]
    assert list(settled_ends(answer)) == [len('根据政策，"员工每年有十五天假期。" [1]'),
                                          len('根据政策，"员工每年有十五天假期。" [1] 另外，"病假需要证明。"[2]')]
    assert list(settled_ends('根据政策，"员工每年有十五天假期。" [')) == []  # the marker may still come
    # A straight quote after 。 may yet be the end's: the end waits for what follows it.
    for waiting in ('年假二十天。"', '年假二十天。" ', '年假二十天。" [1'):
        assert list(settled_ends(waiting)) == []
    assert list(settled_ends('年假二十天。"下')) == [len("年假二十天。")]
    assert list(settled_ends('"年假二十天。"[1]下')) == [len('"年假二十天。"[1]')]
    # Without a marker after it, a straight quote after 。 is no part of the end, as before.
    assert spans('他说"好。"然后走了。') == ['他说"好。', '"然后走了。']


def test_a_chinese_end_is_released_once_what_follows_cannot_extend_it():
    assert list(settled_ends("年假二十天。")) == []
    assert list(settled_ends("年假二十天。[")) == []  # a marker may follow
    assert list(settled_ends("年假二十天。[1]")) == []
    assert list(settled_ends("年假二十天。[1]病")) == [len("年假二十天。[1]")]
    assert list(settled_ends("年假二十天。病")) == [len("年假二十天。")]
    assert list(settled_ends("「保存しました。」")) == []  # a closing mark came, and more may
    assert list(settled_ends("「保存しました。」と")) == []  # the quotation runs on: no end
    assert list(settled_ends("हर कर्मचारी को बीस दिन मिलते हैं। ")) == []
    assert list(settled_ends("हर कर्मचारी को बीस दिन मिलते हैं। [1] ब")) == [len("हर कर्मचारी को बीस दिन मिलते हैं। [1]")]


def test_slack_cuts_a_long_chinese_paragraph_at_a_sentence_end():
    sentence = "每位员工每年享有二十天带薪年假，未休完的年假不能顺延到下一年。"
    text = sentence * 200  # no space, no line break: before, cut wherever the limit fell
    for split in (split_text, split_markdown):
        pieces = split(text, 3000)
        assert "".join(pieces) == text
        assert all(len(p) <= 3000 and p.endswith("。") for p in pieces)


def test_a_chinese_sentence_counts_its_words():
    assert word_count("每位员工每年享有二十天带薪年假。") == 8
    assert word_count("使用 Redis 缓存会话。") == 4
    assert word_count("「保存しました。」と表示されます。") == 7
    assert word_count("a plain - sentence") == 4  # white space alone, as before


# -- end to end: the extractive composer quotes one sentence, verified -------------------------

HINDI_POLICY = (
    "हर नए कर्मचारी को पहले दिन दफ़्तर की चाबी और एक लैपटॉप मिलता है। लैपटॉप आईटी डेस्क से लिया जाता है और "
    "उस पर कंपनी का नाम लिखा होता है। हर कर्मचारी को साल में बीस दिन की छुट्टी मिलती है और बची हुई छुट्टी "
    "अगले साल तक नहीं जाती।\n\n"
    "बीमारी की छुट्टी अलग से गिनी जाती है। तीन दिन से ज़्यादा बीमारी पर डॉक्टर का पर्चा ज़रूरी है।"
)
HINDI_ANSWER = "हर कर्मचारी को साल में बीस दिन की छुट्टी मिलती है और बची हुई छुट्टी अगले साल तक नहीं जाती।"
CHINESE_POLICY = (
    "新员工入职第一天会领到门禁卡和一台笔记本电脑。笔记本电脑由信息技术部统一配置，连接公司网络需要先安装 VPN 客户端。"
    "每位员工每年享有二十天 PTO，未休完的 PTO 不能顺延到下一年。\n\n"
    "病假另行计算。连续病假超过三天需要提供医生证明。"
)
CHINESE_ANSWER = "每位员工每年享有二十天 PTO，未休完的 PTO 不能顺延到下一年。"


def _passage(number: int, text: str, source: str) -> Passage:
    chunk = Chunk(chunk_id=f"c{number}", doc_id=source, source=source, heading_path=("Policy",), page=None,
                  ordinal=number, text=text, tokens=len(text.split()))
    return Passage(number, chunk, text)


@pytest.mark.parametrize("question, policy, answer", [
    ("साल में कितने दिन की छुट्टी मिलती है?", HINDI_POLICY, HINDI_ANSWER),
    ("PTO 每年有多少天？", CHINESE_POLICY, CHINESE_ANSWER),
], ids=["hindi", "chinese"])
def test_the_extractive_answer_quotes_one_sentence_of_the_paragraph_and_it_verifies(
        question, policy, answer, test_embedder):
    paragraph = policy.split("\n\n")[0]
    assert answer in paragraph and paragraph.endswith(answer) and len(paragraph) > 2 * len(answer)
    passages = [_passage(1, policy, "policy.md"),
                _passage(2, "Book trains through the travel desk. Hotels are booked by the office manager.",
                         "travel.md")]
    comp = ExtractiveComposer(test_embedder.encode_each).compose(question, passages, [], [])
    given = {p.number: (p.chunk.chunk_id, p.text) for p in passages}
    report = check_answer(comp.text, given, {p.chunk.chunk_id for p in passages})
    assert not comp.refused, comp.refusal_reason
    assert [(q.text, q.number) for q in report.quotes] == [(answer, 1)], comp.text
    assert all(q.verified for q in report.quotes) and all(c.resolved and c.retrieved for c in report.citations)
    assert f'"{answer}" [1]' in comp.text and paragraph not in comp.text


def test_a_turn_over_a_multilingual_collection_quotes_one_sentence_each(tmp_path, monkeypatch, test_embedder):
    """The whole turn (ingest, retrieval, the extractive composer, the checks) over a small
    collection in Hindi, Chinese and English."""
    import bot.wiring
    from bot.cli import cli

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "chhutti.md").write_text(f"# छुट्टी\n\n{HINDI_POLICY}\n", encoding="utf-8")
    (docs / "nianjia.md").write_text(f"# 年假\n\n{CHINESE_POLICY}\n", encoding="utf-8")
    (docs / "travel.md").write_text("# Travel\n\nBook trains through the travel desk. Hotels are booked by "
                                    "the office manager.\n", encoding="utf-8")
    monkeypatch.setenv("CITEBOT_STORE", str(tmp_path / "store"))
    monkeypatch.setattr(bot.wiring.Components, "embedder", test_embedder, raising=False)
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", str(docs)], catch_exceptions=False).exit_code == 0
    for question, source, answer in (("साल में कितने दिन की छुट्टी मिलती है?", "chhutti.md", HINDI_ANSWER),
                                      ("PTO 每年有多少天？", "nianjia.md", CHINESE_ANSWER)):
        result = runner.invoke(cli, ["ask", question, "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        (out,) = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        assert not out["refused"], out["answer"]
        assert out["quotes"] and all(q["verified"] for q in out["quotes"]), out["quotes"]
        assert out["quotes"][0]["text"] == answer, out["answer"]
        marker = re.search(re.escape(f'"{answer}" [') + r"(\d+)\]", out["answer"])
        assert marker, out["answer"]
        assert {p["number"]: p["source"] for p in out["passages"]}[int(marker.group(1))] == source
