"""moto's routing of a request to its handler, found once per URL.

moto's ``BotocoreStubber.process_request`` finds a request's handler on every request: it tries
the URL against the pattern of every service moto knows (a few hundred, in order), builds the
matching backend's table of URLs (``BaseBackend.urls``, a new dict each time) and compiles each
URL of that table until one matches. The answer depends only on the URL (and on moto's settings
for ISO regions, which change the table), yet a local run asks it for each of its thousands of
DynamoDB calls.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from longstep_kit.local.moto_patches.registry import generation, patch, speed

# (URL without its query string, ISO regions on, patch generation) -> the services whose pattern
# matched, in moto's order, and the handler moto found (None: none matched). Bounded: S3 object
# URLs are many; an entry is cheap to find again.
_ROUTES_KEPT = 4096
_routes: dict[tuple[str, bool, int], tuple[tuple[str, ...], Any]] = {}
_routes_lock = threading.Lock()


@speed
def requests_routed_once() -> None:
    """moto's stubber finds each URL's handler once, not on every request.

    Keeps identical: moto's order of search (service patterns in ``backend_url_patterns``
    order, then the backend's URLs in its table's order), its checks on every request
    (``passthrough_url``, then ``passthrough_service`` and ``service_whitelisted`` for each
    service whose pattern matched, as moto meets them), the backend of the default account that
    moto creates while routing, the request moto builds and records, the handler's arguments,
    its HTTP errors as answers, and moto's 404 for an AWS URL it does not implement. The route
    is found again when a patch of the local stack is applied or undone (one could change a
    service's handlers) or moto's ISO-region setting changes.
    """
    from moto.core import botocore_stubber

    original = botocore_stubber.BotocoreStubber.process_request

    def process_request(stubber: Any, request: Any) -> Any:
        from moto.core.config import passthrough_service, passthrough_url, service_whitelisted
        from moto.core.exceptions import ServiceNotWhitelisted

        parsed_url, _ = botocore_stubber.get_equivalent_url_in_aws_domain(request.url)
        clean_url = f"{parsed_url.scheme}://{parsed_url.netloc}{parsed_url.path}"
        if passthrough_url(clean_url):
            return None
        services, handler = _route(clean_url)
        for service in services:
            if passthrough_service(service):
                return None
            if not service_whitelisted(service):
                raise ServiceNotWhitelisted(service)
            _default_backend(service)  # as moto's routing does: it creates the default account's backend
        if handler is None:
            return original(stubber, request)  # moto's own answer: a 404 or None
        return _call(handler, botocore_stubber.normalize_request(request))

    patch(botocore_stubber.BotocoreStubber, "process_request", process_request)


def _route(clean_url: str) -> tuple[tuple[str, ...], Any]:
    """The services moto meets for ``clean_url`` and the handler it finds (moto's search)."""
    from moto import backend_index
    from moto.settings import enable_iso_regions

    key = (clean_url, bool(enable_iso_regions()), generation())
    found = _routes.get(key)
    if found is not None:
        return found
    services: list[str] = []
    handler = None
    for service, pattern in backend_index.backend_url_patterns:
        if not pattern.match(clean_url):
            continue
        services.append(service)
        for url, method_to_execute in _default_backend(service).urls.items():
            if re.compile(url).match(clean_url):
                handler = method_to_execute
                break
        if handler is not None:
            break
    found = (tuple(services), handler)
    with _routes_lock:
        if len(_routes) >= _ROUTES_KEPT:
            _routes.clear()
        _routes[key] = found
    return found


def _default_backend(service: str) -> Any:
    """The backend moto's routing reads a service's URLs from (the default account's)."""
    import moto.backends as backends
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.core.base_backend import BackendDict

    backend_dict = backends.get_backend(service)  # type: ignore[call-overload]
    if isinstance(backend_dict, BackendDict):
        if "us-east-1" in backend_dict[DEFAULT_ACCOUNT_ID]:
            return backend_dict[DEFAULT_ACCOUNT_ID]["us-east-1"]
        return backend_dict[DEFAULT_ACCOUNT_ID]["aws"]
    return backend_dict["global"]


def _call(handler: Any, normalized_request: Any) -> tuple[int, Any, Any]:
    """moto's call of a route's handler: the request recorded, an HTTP error as the answer."""
    from moto.core.exceptions import HTTPException
    from moto.moto_api import recorder

    try:
        recorder._record_request(normalized_request)
        status, headers, body = handler(normalized_request, normalized_request.raw_url, normalized_request.headers)
    except HTTPException as e:
        return e.code, e.get_headers(), e.get_body()
    return status, headers, body
