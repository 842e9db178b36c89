"""A whole-attempt deadline for the Anthropic SDK's HTTP calls (an httpx2 transport).

httpx's timeouts bound each socket operation, not a request: a server that sends its
headers and then the body a byte every 0.2 s never trips a 0.5 s read timeout. Measured
against bot/testing/anthropic_standin.py's `drip()` with timeout=0.5 s: one 217-byte reply
took 43 s, and the turn waited for all of it (tests/test_faults_anthropic.py). This
transport gives each request its read timeout as a deadline for the whole response, body
included: past it, the next chunk raises httpx2.ReadTimeout, which the SDK reports as
APITimeoutError, so our retry loop (bot.answer.claude.Messages) sees an ordinary timeout.

It is handed to the SDK as its http_client (the SDK's documented way to customise its
HTTP layer); nothing of the SDK is patched. Headers are still read under the per-read
timeout only (a server that drips its headers is bounded by h11's header size limit).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2


class _DeadlineStream(httpx2.SyncByteStream):
    def __init__(
        self, inner: httpx2.SyncByteStream, deadline: float, request: httpx2.Request, timeout_s: float
    ) -> None:
        self._inner = inner
        self._deadline = deadline
        self._request = request
        self._timeout_s = timeout_s

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            if time.monotonic() > self._deadline:
                self.close()
                raise httpx2.ReadTimeout(f"the response took longer than {self._timeout_s:g} s", request=self._request)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class DeadlineTransport(httpx2.BaseTransport):
    """Each request's read timeout bounds its whole response (headers and body)."""

    def __init__(self, inner: httpx2.BaseTransport | None = None) -> None:
        self._inner = inner or httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout_s = (request.extensions.get("timeout") or {}).get("read")
        started = time.monotonic()
        response = self._inner.handle_request(request)
        if timeout_s is None:
            return response
        deadline = started + float(timeout_s)
        if time.monotonic() > deadline:
            response.close()
            raise httpx2.ReadTimeout(f"the response took longer than {timeout_s:g} s", request=request)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        response.stream = _DeadlineStream(response.stream, deadline, request, float(timeout_s))
        return response

    def close(self) -> None:
        self._inner.close()


def http_client() -> httpx2.Client:
    """The SDK's default client settings over the deadline transport."""
    import anthropic

    return anthropic.DefaultHttpxClient(transport=DeadlineTransport())
