"""structlog set-up: JSON lines (console rendering on a TTY), stdlib loggers routed through.

Secrets never reach a log line: a processor masks values of secret-looking keys and
anything shaped like a Slack or Anthropic token.
"""

from __future__ import annotations

import logging
import re
import sys

import structlog

_SECRET_KEYS = re.compile(r"(token|secret|password|api_key|authorization|signature)", re.I)
_SECRET_VALUES = re.compile(r"\b(xox[abposr]-[\w-]+|xapp-[\w-]+|sk-ant-[\w-]+)")


def redact(_logger: object, _method: str, event: dict) -> dict:
    """Mask secret fields and token-shaped strings anywhere in the event."""
    for key, value in list(event.items()):
        if _SECRET_KEYS.search(key) and value not in (None, ""):
            event[key] = "[redacted]"
        elif isinstance(value, str):
            event[key] = _SECRET_VALUES.sub("[redacted]", value)
    return event


def configure(fmt: str = "auto", level: int = logging.INFO) -> None:
    """JSON unless on a TTY (or as asked); logs go to stderr so --json output stays clean."""
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]
    renderer = structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "urllib3", "elastic_transport", "sentence_transformers",
                  "transformers", "filelock", "huggingface_hub"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
