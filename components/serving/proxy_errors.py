"""Errors the API proxy answers itself, as JSON clients can parse: vLLM's (and OpenAI's) error shape.

vLLM 0.27.1 answers its own errors as ``{"error": {"message", "type", "param", "code"}}``
(``vllm/entrypoints/openai/engine/protocol.py``, ``ErrorResponse``/``ErrorInfo``; ``code`` is
the HTTP status, ``type`` a name such as ``BadRequestError``). The OpenAI SDKs read
``error.message`` and ``error.type`` from the body and pick their exception class from the
status. nginx's own error pages are HTML, so every status nginx can produce is mapped here
to a JSON body of the same shape, sent with ``Content-Type: application/json``.

How nginx reaches them: ``error_page <status> /<ERROR_PREFIX>/<status>;`` and one
``location = /<ERROR_PREFIX>/<status> { internal; return ...; }`` per status. A URI, not a
named location: for a request line nginx could not parse (400, 414, 505) it refuses a
redirect to a named location ("empty URI in redirect to named location"), and an internal
URI works there too. The locations are ``internal``: a client asking for them gets the 404.

Two statuses never reach a client: nginx *closes* the connection instead of answering on a
header or body timeout (408) and when the client went away (499); both appear in the
access log only (nginx ``ngx_http_finalize_request`` terminates the request for
``NGX_HTTP_REQUEST_TIME_OUT`` and ``NGX_HTTP_CLIENT_CLOSED_REQUEST``; the real-proxy tests
show it). 408's page is declared all the same; 499 cannot have one (nginx refuses
``error_page 499``: "invalid value"). 494 (nginx's "request header too large") is sent as
the standard 431.

Errors of the engine itself pass through unchanged (``proxy_intercept_errors`` stays off):
``error_page`` applies only to what nginx generates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

ERROR_PREFIX = "/_kimi_k3_error"
"""Path prefix of the internal error locations (never reachable from outside: ``internal``)."""


@dataclass(frozen=True)
class ProxyError:
    """One status the proxy may answer itself, with its JSON body's ``type`` and ``message``."""

    status: int
    """The HTTP status sent to the client."""
    type: str
    """``error.type``, in vLLM's naming (``BadRequestError``, ``NotFoundError``, ``InternalServerError`` ...)."""
    message: str
    """``error.message``: what happened and what the client can do."""

    def body(self) -> str:
        """The JSON body: ``{"error": {"message", "type", "param": null, "code": status}}`` (vLLM's ``ErrorResponse``)."""
        return json.dumps({"error": {"message": self.message, "type": self.type, "param": None, "code": self.status}}, separators=(",", ":"))


PROXY_ERRORS: tuple[ProxyError, ...] = (
    ProxyError(400, "BadRequestError", "The request could not be parsed (malformed request line, headers or body framing)"),
    ProxyError(401, "AuthenticationError", "Missing or wrong API key: send Authorization: Bearer <key>"),
    ProxyError(404, "NotFoundError", "Not Found"),
    ProxyError(405, "MethodNotAllowedError", "Method not allowed"),
    ProxyError(408, "RequestTimeoutError", "The request was not sent in time"),
    ProxyError(413, "RequestEntityTooLarge", "Request body too large"),
    ProxyError(414, "URITooLongError", "Request URI too long"),
    ProxyError(429, "RateLimitError", "Too many requests or connections from this address; retry later"),
    ProxyError(431, "RequestHeaderFieldsTooLargeError", "Request headers too large"),
    ProxyError(499, "ClientClosedRequestError", "The client closed the connection"),
    ProxyError(500, "InternalServerError", "The API proxy failed to handle the request"),
    ProxyError(501, "NotImplementedError", "Transfer encoding not implemented (use Content-Length or chunked)"),
    ProxyError(502, "BadGatewayError", "The engine is not reachable (starting, restarting or stopped); retry"),
    ProxyError(503, "ServiceUnavailableError", "The engine is not available; retry"),
    ProxyError(504, "GatewayTimeoutError", "The engine did not answer in time"),
    ProxyError(505, "HTTPVersionNotSupportedError", "HTTP version not supported (use HTTP/1.1)"),
)
"""Every status nginx can answer itself, in order; 494 is sent as 431 (:data:`SENT_AS`)."""

SENT_AS = {494: 431}
"""nginx-internal statuses and the standard status sent for them."""

NEVER_SENT = (408, 499)
"""Statuses nginx closes the connection on instead of answering (access log only; see the module docstring)."""

NO_PAGE = (499,)
"""Statuses nginx accepts no ``error_page`` for."""

_BY_STATUS = {error.status: error for error in PROXY_ERRORS}


def error_of(status: int) -> ProxyError:
    """The :class:`ProxyError` of ``status`` (an nginx-internal one through :data:`SENT_AS`)."""
    return _BY_STATUS[SENT_AS.get(status, status)]


def error_return(status: int) -> str:
    """The ``return`` directive answering ``status`` with its JSON body (quoted for nginx: the body holds no ``'``)."""
    body = error_of(status).body()
    assert "'" not in body and "\\" not in body, body  # nginx single-quoted string: no escapes needed
    return f"return {SENT_AS.get(status, status)} '{body}';"


def error_page_lines(indent: str = "        ") -> list[str]:
    """The ``error_page`` directives and internal locations of one ``server`` block."""
    paged = [error for error in PROXY_ERRORS if error.status not in NO_PAGE]
    lines = []
    for error in paged:
        lines.append(f"{indent}error_page {error.status} {ERROR_PREFIX}/{error.status};")
    for internal, sent in SENT_AS.items():
        lines.append(f"{indent}error_page {internal} ={sent} {ERROR_PREFIX}/{sent};")
    for error in paged:
        lines.append(f"{indent}location = {ERROR_PREFIX}/{error.status} {{ internal; {error_return(error.status)} }}")
    return lines


__all__ = ["ERROR_PREFIX", "NEVER_SENT", "NO_PAGE", "PROXY_ERRORS", "SENT_AS", "ProxyError", "error_of", "error_page_lines", "error_return"]
