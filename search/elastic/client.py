"""The Elasticsearch client and what every part of the store shares: connect(), the
mapping of client errors to citebot errors that say what to fix, the index behind the
alias and its _meta, one search over the alias and a scan of a whole index.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from elastic_transport import TlsError
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    Elasticsearch,
    NotFoundError,
    TransportError,
)
from elasticsearch.helpers import BulkIndexError

from search.config import redact_url, scrub
from search.errors import CitebotError, ConfigError, SearchBackendError, StoreError

# Transport-level retries of one request (connection errors, 502-504); a timed-out one is
# retried only in an ingest's bulk writes, so a turn ends within its timeout
# (docs/decisions/0022-no-timeout-retries.md).
REQUEST_MAX_RETRIES = 3
# Page size when reading a whole index (iter_chunks, copying documents at commit).
PAGE_SIZE = 500


def connect(
    url: str,
    *,
    api_key: str | None = None,
    username: str | None = None,
    password: str | None = None,
    ca_certs: str | None = None,
    timeout_s: float = 30.0,
) -> Elasticsearch:
    """A client for one cluster; nothing is sent until the first request."""
    if (username is None) != (password is None):
        raise StoreError("CITEBOT_ES_USERNAME and CITEBOT_ES_PASSWORD go together: set both or neither")
    options: dict[str, Any] = {
        "request_timeout": timeout_s,
        "max_retries": REQUEST_MAX_RETRIES,
        "retry_on_timeout": False,
        "retry_on_status": (502, 503, 504),
    }
    if api_key:
        options["api_key"] = api_key
    if username is not None and password is not None:
        options["basic_auth"] = (username, password)
    if ca_certs:
        options["ca_certs"] = ca_certs
    try:
        return Elasticsearch(url, **options)
    except ValueError as exc:  # a malformed URL; its text quotes the URL, password and all
        raise ConfigError(
            f"bad setting: CITEBOT_ES_URL: cannot use {redact_url(url)!r}: {scrub(str(exc), url)}"
        ) from None


class ElasticClient:
    """Errors, the alias's index and reads shared by the store's parts (see ElasticStore)."""

    # Set by ElasticStore.__init__; declared for the type checker.
    es: Elasticsearch
    alias: str
    url: str

    # -- errors ---------------------------------------------------------------------------
    @contextmanager
    def _calls(self, doing: str, error: type[CitebotError] = StoreError) -> Iterator[None]:
        """Turn client errors into citebot errors that say what to fix."""
        try:
            yield
        except BulkIndexError as exc:
            raise error(
                f"Elasticsearch at {self.url} refused {len(exc.errors)} document(s) while "
                f"{doing}; first: {_bulk_reason(exc.errors[0] if exc.errors else {})}"
            ) from exc
        except AuthenticationException as exc:
            raise error(
                f"Elasticsearch at {self.url} rejected the credentials while {doing}: set "
                "CITEBOT_ES_API_KEY, or CITEBOT_ES_USERNAME and CITEBOT_ES_PASSWORD"
            ) from exc
        except AuthorizationException as exc:
            raise error(
                f"Elasticsearch at {self.url} refused {doing} for lack of privileges: the "
                f"user needs read, write and manage on {self.alias} and {self.alias}-v*"
            ) from exc
        except ApiError as exc:
            raise error(
                f"Elasticsearch at {self.url} answered {exc.meta.status} while {doing}: {_reason(exc)}"
            ) from exc
        except TlsError as exc:
            raise error(
                f"the TLS handshake with Elasticsearch at {self.url} failed while {doing} "
                f"({exc}); set CITEBOT_ES_CA_CERTS to the PEM file of the cluster's CA"
            ) from exc
        except TransportError as exc:
            hint = "start it, or point CITEBOT_ES_URL at a running cluster"
            raise error(f"Elasticsearch at {self.url} is unreachable while {doing} ({exc}); {hint}") from exc

    # -- the index behind the alias --------------------------------------------------------
    def _current_index(self, error: type[CitebotError] = StoreError) -> str | None:
        """The index the alias points at, or None when the alias does not exist."""
        with self._calls(f"resolving the alias {self.alias}", error):
            try:
                found = self.es.indices.get_alias(name=self.alias).body
            except NotFoundError:
                if self.es.indices.exists(index=self.alias):
                    raise StoreError(
                        f"{self.alias} on {self.url} is an index, not an alias: citebot keeps "
                        "its collection behind an alias; set CITEBOT_INDEX to another name"
                    ) from None
                return None
        return max(found) if found else None

    def _citebot_meta(self, index: str, doing: str = "reading the mapping") -> dict[str, Any]:
        """The citebot part of the index's _meta: format, state, model stamp, statistics."""
        with self._calls(f"{doing} of {index}"):
            mapping = self.es.indices.get_mapping(index=index).body
        return mapping[index]["mappings"].get("_meta", {}).get("citebot", {})

    # -- reads ----------------------------------------------------------------------------
    def _search(self, doing: str, error: type[CitebotError] = SearchBackendError, **body: Any) -> dict[str, Any]:
        with self._calls(doing, error):
            try:
                return self.es.search(index=self.alias, **body).body
            except NotFoundError as exc:
                if _reason_type(exc) == "index_not_found_exception":
                    return {"hits": {"hits": [], "total": {"value": 0}}, "aggregations": {}}
                raise

    def _scan(
        self,
        query: dict[str, Any],
        source: list[str] | bool,
        *,
        index: str | None = None,
        vectors: bool = False,
        sort: list[Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every hit of a query, in pages, under one point in time."""
        target = index or self.alias
        with self._calls(f"reading {target}"):
            try:
                pit = self.es.open_point_in_time(index=target, keep_alive="2m").body["id"]
            except NotFoundError as exc:
                if _reason_type(exc) == "index_not_found_exception":
                    return
                raise
        after: list[Any] | None = None
        src: Any = source
        if vectors:
            src = {"exclude_vectors": False}
        try:
            while True:
                with self._calls(f"reading {target}"):
                    page = self.es.search(
                        pit={"id": pit, "keep_alive": "2m"},
                        query=query,
                        size=PAGE_SIZE,
                        sort=sort or ["_shard_doc"],
                        source=src,
                        search_after=after,
                    ).body
                hits = page["hits"]["hits"]
                yield from hits
                if len(hits) < PAGE_SIZE:
                    return
                after = hits[-1]["sort"]
        finally:
            try:
                self.es.close_point_in_time(id=pit)
            except (ApiError, TransportError):
                pass  # it expires on its own


def _reason_type(exc: ApiError) -> str:
    try:
        return str(exc.body["error"]["type"])
    except (TypeError, KeyError):
        return ""


def _reason(exc: ApiError) -> str:
    try:
        err = exc.body["error"]
        root = (err.get("root_cause") or [err])[0]
        return f"{root.get('type')}: {root.get('reason')}"
    except (TypeError, KeyError, AttributeError):
        return str(exc)


def _bulk_reason(item: dict[str, Any]) -> str:
    """`<id>: <error type>: <reason>` of one failed bulk item (never its document)."""
    for op in item.values():
        if isinstance(op, dict):
            err = op.get("error") or {}
            if isinstance(err, dict):
                return f"{op.get('_id')}: {err.get('type')}: {err.get('reason')}"
            return f"{op.get('_id')}: {err or op.get('status')}"
    return "no detail"
