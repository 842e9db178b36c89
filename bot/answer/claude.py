"""The Claude composer: grounded answers through the Anthropic Messages API.

Only this module talks to Anthropic. It writes answers from labelled passages
(bot.answer.prompt), condenses follow-ups into standalone questions, and, when asked, judges
whether each cited sentence follows from its passages.

Failure handling: the SDK's own retries are off (max_retries=0) and ours run instead,
so one time budget bounds the whole exchange. Timeouts, connection errors, 408, 429,
5xx and 529 (overloaded) are retried with exponential backoff, or after the server's
retry-after when it sends one, until the budget (anthropic_budget_s) would be
exceeded. Then, and on any other failure (a 4xx, an unreadable or malformed reply), the
extractive answer is served with a label saying it is a fallback and why: never
silence, never an unlabelled fallback.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anthropic
import structlog

from bot.answer import deadline
from bot.answer.checks import ClaimCheck, ClaimReport, cited_sentences
from bot.answer.compose import Composer, Composition
from bot.answer.condense import condense as heuristic_condense
from bot.answer.passages import Passage
from bot.answer.prompt import (
    REFUSAL_TOKEN,
    Prompt,
    answer_prompt,
    condense_prompt,
    echoed_refusal,
    judge_prompt,
    parse_refusal,
    parse_verdict,
)
from bot.memory.state import PriorTurn
from bot.metrics import BACKEND_ERRORS
from bot.settings import Settings
from search.errors import ComposeError, ConfigError
from search.glossary import Expansion, GlossaryEntry

log = structlog.get_logger("citebot.claude")

CLAUDE = "claude"
FALLBACK = "extractive_fallback"

# Retried: request timeout, rate limit, and every server-side status (500-504, 529).
RETRY_STATUS = frozenset({408, 429})
RETRY_STATUS_MIN = 500
# Backoff before attempt n+1: BACKOFF_BASE_S * 2**(n-1), capped, with up to 25% jitter
# taken off so replicas do not retry in step. 0.5, 1, 2, 4, 8 s: a burst of 429s or 529s
# gets five retries in about 16 s, well inside the default 60 s budget.
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 8.0
BACKOFF_JITTER = 0.25
# An attempt with less time than this left cannot get an answer back: give up instead.
MIN_ATTEMPT_S = 0.05
# A standalone question is one line: a short reply, a small share of the budget (the
# heuristic is a fair stand-in when the model is slow).
CONDENSE_MAX_TOKENS = 200
CONDENSE_BUDGET_SHARE = 0.25
CONDENSE_MAX_CHARS = 500
# A verdict is one line.
JUDGE_MAX_TOKENS = 150


@dataclass
class Exchange:
    """A message the API returned, and what getting it took."""

    message: Any  # anthropic.types.Message; kept loose since replies may be malformed
    attempts: int
    elapsed_ms: float

    @property
    def usage(self) -> dict[str, int]:
        usage = getattr(self.message, "usage", None)
        out: dict[str, int] = {}
        for key in ("input_tokens", "output_tokens"):
            value = getattr(usage, key, None)
            if isinstance(value, int):
                out[key] = value
        return out


def add_usage(total: dict[str, int], more: Mapping[str, int]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0) + value


def reply_text(message: Any) -> str:
    """The text of a reply; a reply with no non-empty text block is malformed."""
    content = getattr(message, "content", None)
    if not isinstance(content, list) or not content:
        raise ComposeError("the model's reply was malformed: it held no content")
    texts = [
        b.text for b in content if getattr(b, "type", None) == "text" and isinstance(getattr(b, "text", None), str)
    ]
    if not texts:
        kinds = sorted({str(getattr(b, "type", "?")) for b in content})
        raise ComposeError(f"the model's reply was malformed: no text block (got {', '.join(kinds)})")
    text = "".join(texts)
    if not text.strip():
        raise ComposeError("the model's reply was malformed: its text was empty")
    return text


def retry_after_s(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asks us to wait: retry-after-ms, retry-after in seconds or a date."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def describe_status(exc: anthropic.APIStatusError) -> str:
    """'HTTP 529 overloaded_error: Overloaded' from the error body, when it has one."""
    body = exc.body if isinstance(exc.body, dict) else {}
    err = body.get("error") if isinstance(body.get("error"), dict) else body
    kind = err.get("type") if isinstance(err, dict) else None
    text = err.get("message") if isinstance(err, dict) else None
    out = f"HTTP {exc.status_code}"
    if kind:
        out += f" {kind}"
    if text:
        out += f": {str(text)[:200]}"
    if exc.status_code == 401:
        out += " (check ANTHROPIC_API_KEY)"
    elif exc.status_code == 404:
        out += " (check CITEBOT_ANTHROPIC_MODEL)"
    return out


@dataclass
class Messages:
    """The Messages API with our retries: every call ends within its time budget."""

    client: anthropic.Anthropic
    model: str
    timeout_s: float
    budget_s: float
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    def backoff_s(self, attempt: int) -> float:
        wait = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
        return wait * (1 - BACKOFF_JITTER * self.rng.random())

    def create(
        self,
        prompt: Prompt,
        max_tokens: int,
        errors: list[str],
        *,
        purpose: str,
        deadline: float | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Exchange:
        """One reply, retried within the budget; ComposeError once it cannot be had.

        Each failed attempt is appended to `errors` ("attempt 2: HTTP 529 …"). With
        `on_text`, the reply is streamed (messages.stream) and each text delta handed to it
        as it arrives; once any text has been handed on, a failure is not retried (a second
        attempt would write another answer after the start of the first): ComposeError.
        """
        streamed: list[str] = []  # the deltas handed to on_text
        started = self.clock()
        deadline = started + self.budget_s if deadline is None else deadline
        attempt = 0
        while True:
            remaining = deadline - self.clock()
            if remaining < MIN_ATTEMPT_S:
                last = errors[-1] if errors else "no attempt made"
                raise ComposeError(
                    f"no time left in the {self.budget_s:g} s budget after {attempt} attempt(s) ({last})"
                )
            attempt += 1
            timeout = min(self.timeout_s, remaining)
            wait: float | None = None
            try:
                if on_text is None:
                    message = self.client.messages.create(
                        model=self.model,
                        max_tokens=max_tokens,
                        system=prompt.system,
                        messages=[{"role": "user", "content": prompt.user}],
                        timeout=timeout,
                    )
                else:
                    message = self._stream(prompt, max_tokens, timeout, on_text, streamed)
                return Exchange(message, attempt, round((self.clock() - started) * 1000, 2))
            except anthropic.APITimeoutError:
                what = f"timed out after {timeout:.1f} s"
            except anthropic.APIConnectionError as exc:
                what = f"connection failed: {exc.message}"
            except anthropic.APIStatusError as exc:
                what = describe_status(exc)
                if exc.status_code not in RETRY_STATUS and exc.status_code < RETRY_STATUS_MIN:
                    errors.append(f"attempt {attempt}: {what}")
                    log.warning("anthropic_call_failed", purpose=purpose, attempt=attempt, error=what)
                    raise ComposeError(f"{what} (not retried)") from exc
                wait = retry_after_s(exc.response.headers)
            except (anthropic.AnthropicError, ValueError) as exc:  # a reply the SDK could not read
                what = f"unreadable reply: {type(exc).__name__}: {str(exc)[:200]}"
                errors.append(f"attempt {attempt}: {what}")
                log.warning("anthropic_call_failed", purpose=purpose, attempt=attempt, error=what)
                raise ComposeError(f"the model's reply was malformed ({what})") from exc
            errors.append(f"attempt {attempt}: {what}")
            if streamed:  # the caller has shown part of this answer: no second one
                raise ComposeError(f"{what} after the answer began to stream (not retried)")
            asked = wait is not None
            wait = wait if wait is not None else self.backoff_s(attempt)
            left = deadline - self.clock()
            if wait + MIN_ATTEMPT_S >= left:
                why = f"retry-after {wait:g} s exceeds" if asked else "no time left in"
                log.warning("anthropic_gave_up", purpose=purpose, attempts=attempt, error=what)
                raise ComposeError(f"{what}; gave up after {attempt} attempt(s): {why} the {self.budget_s:g} s budget")
            log.warning(
                "anthropic_retry",
                purpose=purpose,
                attempt=attempt,
                error=what,
                wait_s=round(wait, 3),
                retry_after=asked,
            )
            self.sleep(wait)

    def _stream(
        self, prompt: Prompt, max_tokens: int, timeout: float, on_text: Callable[[str], None], streamed: list[str]
    ) -> Any:
        with self.client.messages.stream(
            model=self.model,
            max_tokens=max_tokens,
            system=prompt.system,
            messages=[{"role": "user", "content": prompt.user}],
            timeout=timeout,
        ) as stream:
            for text in stream.text_stream:
                streamed.append(text)
                on_text(text)
            return stream.get_final_message()


def build_client(settings: Settings) -> anthropic.Anthropic:
    """The SDK client, its own retries off (ours run within the budget; bot.answer.deadline)."""
    if settings.anthropic_api_key is None:
        raise ConfigError("the Claude composer needs ANTHROPIC_API_KEY (unset it for extractive answers)")
    return anthropic.Anthropic(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url or None,
        timeout=settings.anthropic_timeout_s,
        max_retries=0,
        http_client=deadline.http_client(),
    )


class ModelClaimJudge:
    """Asks the model, one cited sentence at a time, whether it follows from its passages."""

    def __init__(self, messages: Messages) -> None:
        self.messages = messages

    def judge(self, answer: str, passages: Mapping[int, str]) -> ClaimReport:
        report = ClaimReport(model=self.messages.model)
        started = self.messages.clock()
        deadline = started + self.messages.budget_s  # one budget for the whole turn's claims
        for sentence in cited_sentences(answer):
            given = [(n, passages[n]) for n in sentence.numbers if n in passages]
            if not given:
                continue  # cites nothing that was given: the citation check flags it
            errors: list[str] = []
            try:
                exchange = self.messages.create(
                    judge_prompt(sentence.text, given), JUDGE_MAX_TOKENS, errors, purpose="judge", deadline=deadline
                )
                report.calls += exchange.attempts
                add_usage(report.usage, exchange.usage)
                supported, reason = parse_verdict(reply_text(exchange.message))
            except ComposeError as exc:
                report.calls += len(errors)
                supported, reason = None, f"not judged: {exc}"
            report.errors += errors
            if supported is None:
                report.errors.append(f"{sentence.text[:60]!r}: {reason}")
            report.claims.append(
                ClaimCheck(
                    sentence=sentence.text,
                    numbers=[n for n, _ in given],
                    start=sentence.start,
                    end=sentence.end,
                    supported=supported,
                    reason=reason,
                )
            )
        report.latency_ms = round((self.messages.clock() - started) * 1000, 2)
        log.info(
            "claims_judged",
            claims=len(report.claims),
            unsupported=sum(1 for c in report.claims if c.supported is False),
            unjudged=sum(1 for c in report.claims if c.supported is None),
            calls=report.calls,
            usage=report.usage,
            latency_ms=report.latency_ms,
        )
        return report


class ClaudeComposer:
    """Answers with Claude from labelled passages; serves the fallback, labelled, when it cannot."""

    def __init__(
        self, messages: Messages, fallback: Composer, *, max_tokens: int, claim_judge: ModelClaimJudge | None = None
    ) -> None:
        self.messages = messages
        self.fallback = fallback
        self.max_tokens = max_tokens
        self.claim_judge = claim_judge

    # Writes its answer as a stream: compose(on_text=…) hands each piece on as it arrives.
    streams = True

    @property
    def model(self) -> str:
        return self.messages.model

    @classmethod
    def from_settings(cls, settings: Settings, *, fallback: Composer) -> ClaudeComposer:
        messages = Messages(
            build_client(settings), settings.anthropic_model, settings.anthropic_timeout_s, settings.anthropic_budget_s
        )
        return cls(
            messages,
            fallback,
            max_tokens=settings.anthropic_max_tokens,
            claim_judge=ModelClaimJudge(messages) if settings.claim_judge else None,
        )

    def compose(
        self,
        question: str,
        passages: Sequence[Passage],
        definitions: Sequence[GlossaryEntry],
        aliases: Sequence[Expansion],
        on_text: Callable[[str], None] | None = None,
        *,
        closest: bool = False,
    ) -> Composition:
        """The answer, streamed to `on_text`; `closest`: the prompt says the evidence is weak."""
        prompt = answer_prompt(question, passages, definitions, aliases, closest=closest)
        errors: list[str] = []
        started = self.messages.clock()
        usage: dict[str, int] = {}
        try:
            exchange = self.messages.create(prompt, self.max_tokens, errors, purpose="answer", on_text=on_text)
            usage = exchange.usage
            text = reply_text(exchange.message)
        except ComposeError as exc:
            model_ms = round((self.messages.clock() - started) * 1000, 2)
            return self._fallback(str(exc), question, passages, definitions, aliases, prompt, errors, usage, model_ms)
        model_ms = exchange.elapsed_ms
        model = getattr(exchange.message, "model", None) or self.model
        stop = getattr(exchange.message, "stop_reason", None)
        comp = Composition(
            text=text,
            composer=CLAUDE,
            model=model,
            usage=usage,
            prompt_chars=prompt.chars,
            prompt=prompt.render(),
            errors=errors,
            timings_ms={"model": model_ms},
        )
        reason = parse_refusal(text)
        echoed = echoed_refusal(reason, [(p.number, p.text) for p in passages]) if reason else None
        if echoed is not None:
            # The document wrote the refusal and the model repeated it: not a decline.
            errors.append(f"the reply repeated a {REFUSAL_TOKEN} line written in passage [{echoed}]")
            return self._fallback(
                f"its reply repeated a {REFUSAL_TOKEN} line that passage [{echoed}] holds (document text, "
                "not the model's judgement)",
                question,
                passages,
                definitions,
                aliases,
                prompt,
                errors,
                usage,
                model_ms,
                backend_error=False,
            )
        if stop == "refusal":
            reason = reason or "the model declined to answer (stop_reason: refusal)"
        if reason is not None:
            comp.refused, comp.refusal_reason = True, f"the model declined: {reason}"
        elif stop == "max_tokens":
            comp.errors.append(f"the answer was cut off at the {self.max_tokens}-token limit")
            comp.label = f"the model's answer was cut off at its {self.max_tokens}-token limit"
        log.info(
            "compose_done",
            model=model,
            refused=comp.refused,
            attempts=exchange.attempts,
            usage=usage,
            prompt_chars=prompt.chars,
            model_ms=model_ms,
            stop_reason=stop,
        )
        return comp

    def _fallback(
        self,
        reason: str,
        question: str,
        passages: Sequence[Passage],
        definitions: Sequence[GlossaryEntry],
        aliases: Sequence[Expansion],
        prompt: Prompt,
        errors: list[str],
        usage: dict[str, int],
        model_ms: float,
        *,
        backend_error: bool = True,
    ) -> Composition:
        log.warning("compose_fallback", model=self.model, reason=reason, attempts=len(errors))
        if backend_error:
            BACKEND_ERRORS.labels("anthropic").inc()
        started = self.messages.clock()
        comp = self.fallback.compose(question, passages, definitions, aliases)
        own = comp.label or f"{comp.composer} answer"
        return Composition(
            text=comp.text,
            composer=FALLBACK,
            refused=comp.refused,
            refusal_reason=comp.refusal_reason,
            model=None,
            label=f"fallback: Claude ({self.model}) gave no usable answer — {reason}. Shown instead: {own}",
            usage=usage,
            prompt_chars=prompt.chars,
            prompt=prompt.render(),
            errors=[*errors, f"fallback to {comp.composer}: {reason}", *comp.errors],
            timings_ms={"model": model_ms, "fallback": round((self.messages.clock() - started) * 1000, 2)},
        )

    def condense(self, question: str, history: list[PriorTurn]) -> str:
        """A standalone question from a follow-up, by the model; the heuristic if it fails."""
        if not history:
            return question
        errors: list[str] = []
        deadline = self.messages.clock() + self.messages.budget_s * CONDENSE_BUDGET_SHARE
        try:
            exchange = self.messages.create(
                condense_prompt(question, history), CONDENSE_MAX_TOKENS, errors, purpose="condense", deadline=deadline
            )
            text = reply_text(exchange.message)
        except ComposeError as exc:
            log.warning("condense_fallback", reason=str(exc))
            return heuristic_condense(question, history)
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        line = line.strip("\"'“”‘’` ")
        if not line or len(line) > CONDENSE_MAX_CHARS:
            log.warning("condense_fallback", reason=f"unusable standalone question ({len(line)} chars)")
            return heuristic_condense(question, history)
        log.info("condense_done", attempts=exchange.attempts, usage=exchange.usage, model_ms=exchange.elapsed_ms)
        return line
