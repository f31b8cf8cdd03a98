"""The run UI (``longstep ui``): a web page on 127.0.0.1 to follow, steer and decide runs.

``ui/server.py`` is the HTTP server (the standard library's, one thread per request), its JSON
routes and the Server-Sent Events of a run's stream; ``ui/backend.py`` is what the routes do,
on the operator's own AWS clients (the runs list, a run's view, steering, approvals);
``ui/guard.py`` is what every request must pass (the per-serve token, ``Host`` and ``Origin``);
``ui/assets.py`` serves the page itself (``ui/static/``: HTML, JavaScript, CSS, package data; no
build step, nothing fetched from elsewhere).
"""
