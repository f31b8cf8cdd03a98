"""The run UI's page: ``static/index.html``, ``static/ui.js`` (the runs list, a run's view),
``static/timeline.js`` (its live timeline) and ``static/ui.css`` (package data, read once), and the
headers every answer carries.

The page's script builds every element with ``textContent`` (never ``innerHTML`` of run data);
the Content-Security-Policy allows only this origin's script, style and requests (no inline
script, no framing, no form posts elsewhere), so even text that slipped through could not run.
"""

from __future__ import annotations

import functools
from importlib import resources

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # for browsers that predate frame-ancestors
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# path -> (file under static/, content type)
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/ui.js": ("ui.js", "text/javascript; charset=utf-8"),
    "/static/timeline.js": ("timeline.js", "text/javascript; charset=utf-8"),
    "/static/ui.css": ("ui.css", "text/css; charset=utf-8"),
}


@functools.cache
def asset(path: str) -> tuple[bytes, str] | None:
    """The bytes and content type served at ``path``; None when it is not an asset."""
    if path not in ASSETS:
        return None
    name, content_type = ASSETS[path]
    return (resources.files("longstep_kit.ui").joinpath("static", name).read_bytes(), content_type)
