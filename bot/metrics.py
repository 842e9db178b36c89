"""Prometheus metrics: what operators watch. One registry of citebot's own (served at
/metrics by `citebot serve`, on the HTTP port or, in Socket Mode, on CITEBOT_METRICS_PORT).

Each metric is moved at one place: turns, stages and failed checks when a turn is logged
(bot.answer.turn.log_turn), backend errors where each backend's errors are translated
(Redis: bot.memory.redis; Slack: bot.slack.delivery; search and Anthropic: the turn),
dedupe hits, rate-limited requests and Home tab failures in the Slack adapter.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

REGISTRY = CollectorRegistry(auto_describe=True)

OUTCOMES = ("answered", "closest", "refused_gate", "refused_model", "error")
STAGES = ("retrieve", "compose", "checks", "total")
CHECK_KINDS = ("quote", "citation", "claim")
BACKENDS = ("search", "redis", "anthropic", "slack")
HOME_PARTS = ("coverage", "turns", "publish")  # what the Home tab could not show or send

TURNS = Counter("citebot_turns", "Turns by outcome.", ["outcome"], registry=REGISTRY)
# Seconds; buckets from a cached extractive turn (~20 ms) to a model turn at its budget (60 s).
STAGE_SECONDS = Histogram(
    "citebot_stage_seconds",
    "Time spent in each stage of a turn.",
    ["stage"],
    registry=REGISTRY,
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
FAILED_CHECKS = Counter("citebot_failed_checks", "Failed checks by kind.", ["kind"], registry=REGISTRY)
BACKEND_ERRORS = Counter("citebot_backend_errors", "Errors from a backend.", ["backend"], registry=REGISTRY)
DEDUPE_HITS = Counter("citebot_dedupe_hits", "Deliveries dropped as duplicates.", registry=REGISTRY)
RATE_LIMITED = Counter("citebot_rate_limited", "Questions refused by the rate limit.", registry=REGISTRY)
HOME_FAILURES = Counter("citebot_home_failures", "Home tab parts that failed, by part.", ["part"], registry=REGISTRY)

for _o in OUTCOMES:  # every series exists from the start, at zero
    TURNS.labels(_o)
for _s in STAGES:
    STAGE_SECONDS.labels(_s)
for _k in CHECK_KINDS:
    FAILED_CHECKS.labels(_k)
for _b in BACKENDS:
    BACKEND_ERRORS.labels(_b)
for _p in HOME_PARTS:
    HOME_FAILURES.labels(_p)


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def value(name: str, **labels: str) -> float:
    """A sample's current value (0 when absent): for tests and benchmarks."""
    return REGISTRY.get_sample_value(name, labels) or 0.0
