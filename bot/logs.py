"""structlog set-up: JSON lines (console rendering on a TTY), stdlib loggers routed through.

Exceptions keep their traceback in both renderings: it is rendered to a string in
"exception" (format_exc_info) that JSON lines carry and the console prints.

Secrets never reach a log line: a processor walks the whole event (nested dicts, lists,
tuples and strings) and masks values of secret-looking keys and anything shaped like a
Slack token, an Anthropic key or an HTTP bearer credential.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import structlog

REDACTED = "[redacted]"
_SECRET_KEYS = re.compile(
    r"(token|secret|password|passwd|api_key|apikey|authorization|signature|"
    r"cookie|credential)",
    re.IGNORECASE,
)
_SECRET_VALUES = re.compile(
    r"\b(?:xox[abposre]-[\w-]+|xapp-[\w-]+|sk-ant-[\w-]+)"
    r"|(?<=\b[Bb]earer )[\w\-.~+/]+=*"
    r"|(?<=\b[Bb]asic )[A-Za-z0-9+/]{8,}=*"
)
# Deeper than this an event is not walked further (a cycle, or data no log line needs).
REDACT_MAX_DEPTH = 12


def _mask(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str):
        return _SECRET_VALUES.sub(REDACTED, value)
    if depth >= REDACT_MAX_DEPTH:
        return value
    if isinstance(value, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and _SECRET_KEYS.search(k) and v not in (None, "")
            else _mask(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(_mask(v, depth + 1) for v in value)
    return value


def redact(_logger: object, _method: str, event: dict) -> dict:
    """Mask secret fields and token-shaped strings anywhere in the event, at any depth."""
    return _mask(event)


def configure(fmt: str = "auto", level: int = logging.INFO) -> None:
    """JSON unless on a TTY (or as asked); logs go to stderr so --json output stays clean."""
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # The traceback becomes a string field before redaction, so it is masked too, in both
    # renderings (the console's own exception formatter would also print local variables).
    tail: list[Any] = [structlog.processors.format_exc_info, redact]
    renderer: Any = structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*shared, *tail, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), *tail],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in (
        "httpx",
        "httpcore",
        "urllib3",
        "elastic_transport",
        "sentence_transformers",
        "transformers",
        "filelock",
        "huggingface_hub",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
