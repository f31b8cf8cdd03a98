"""The approval pages on the local stack: a small HTTP server in front of the approval API's function.

Each request under ``/v1/pages/`` becomes an API Gateway REST proxy event (the shape API Gateway
sends a Lambda proxy integration) and is handed to the approval API's function through moto's
Lambda ``Invoke``, so the real handler runs with that function's own environment (its tables, the
link key's secret), and the dispatcher records the invocation like any other.

Why not moto's API Gateway: moto's REST API invocation ignores ``AWS_PROXY`` integrations (only
HTTP and a few AWS service integrations are emulated), and that is the integration the stack uses.
The server also points the functions that write links (``LONGSTEP_APPROVAL_API_URL``) and the
stack's ``ApprovalApiUrl`` output at itself, so the links in notifications, and those every command
against the served stack prints (``longstep approvals``), open these pages. Its door (``local/endpoint_guard.py``) answers
loopback hosts only, refuses requests from other origins, and takes top-level navigations from
other sites (a link opened from a mail) but no other cross-site request.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from longstep import links
from longstep import settings as env
from longstep_kit.local.endpoint_guard import Door

STAGE = "v1"  # as the stack's stage (constructs/approval_api.py STAGE_NAME)
API_HANDLER = "longstep_functions.approval_api.lambda_handler"
ROUTES = ("decide", "inbox", "escalation")  # as constructs/approval_pages.py PAGE_ROUTES
API_URL_OUTPUT = "ApprovalApiUrl"  # the stack's output naming the approval API (constructs/approval_api.py)
MAX_BODY_BYTES = 64 * 1024


def proxy_event(method: str, path: str, headers: dict[str, str], body: str | None, source_ip: str = "127.0.0.1") -> dict[str, Any] | None:
    """The API Gateway proxy event of a page request (``path`` under the stage), or None for no route."""
    parts = path.split("?", 1)[0].split("/")
    # "", stage, "pages", route, link
    if len(parts) != 5 or parts[1] != STAGE or parts[2] != "pages" or parts[3] not in ROUTES or not parts[4]:
        return None
    route, link = parts[3], parts[4]
    resource = f"/pages/{route}/{{link}}"
    return {
        "resource": resource,
        "path": f"/pages/{route}/{link}",
        "httpMethod": method,
        "headers": dict(headers),
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": {"link": link},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": f"/{STAGE}/pages/{route}/{link}",
            "stage": STAGE,
            "requestId": str(uuid.uuid4()),
            "requestTimeEpoch": int(time.time() * 1000),
            "identity": {"sourceIp": source_ip, "userAgent": headers.get("User-Agent", "")},
        },
        "body": body,
        "isBase64Encoded": False,
    }


@dataclass
class PageServer:
    """Serves the approval pages of a started local stack at ``url``.

    Args:
        stack: the local stack (started).
        host: the address to listen on.
        port: the port (0: any free one).
    """

    stack: Any
    host: str = "127.0.0.1"
    port: int = 0
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _api_url: str | None = None  # the stack's ApprovalApiUrl before these pages stood in for it

    @property
    def url(self) -> str:
        """The API's base URL as the links use it (``http://host:port/v1/``)."""
        return f"http://{self.host}:{self.port}/{STAGE}/"

    def start(self) -> None:
        """Listen, and point the functions that write links at this server."""
        self._function = self._function_named(API_HANDLER)
        self._server = ThreadingHTTPServer((self.host, self.port), _handler_class(self))
        self.port = int(self._server.server_address[1])
        self.door = Door(self.port, self.host, navigations=True)
        self._thread = threading.Thread(target=self._server.serve_forever, name="longstep-pages", daemon=True)
        self._thread.start()
        self._point_links_here()

    def stop(self) -> None:
        self.stack.dispatcher.stand_ins.pop(env.ENV_APPROVAL_API_URL, None)
        if self._api_url:  # the stack outlives these pages: its output names the API again
            point_output(self.stack, API_URL_OUTPUT, self._api_url)
            self._api_url = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "PageServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def keys(self) -> links.KeyRing:
        """The stack's link keys (from moto's Secrets Manager)."""
        (secret,) = self.stack.secrets.values()
        return links.keyring_from_secret(self.stack.client("secretsmanager"), secret)

    def decision_link(self, approval_id: str, subject: str = "local approver") -> str:
        """A decision page link for one request, valid until the request expires."""
        item = self.stack.client("dynamodb").get_item(
            TableName=self.stack.outputs["ApprovalsTableName"], Key={"approval_id": {"S": approval_id}}, ConsistentRead=True
        )["Item"]
        capability = links.Capability(links.Scope(approval=approval_id), int(float(item["expires_at"]["N"])), subject)
        return links.decision_url(self.url, self.keys().sign(capability))

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """Run the approval API's function on ``event``; its proxy response (502 when it failed)."""
        answer = self.stack.client("lambda").invoke(FunctionName=self._function, Payload=json.dumps(event).encode())
        payload = json.loads(answer["Payload"].read() or b"{}")
        if answer.get("FunctionError"):
            return {"statusCode": 502, "headers": {"Content-Type": "text/plain"}, "body": "the approval API failed"}
        return payload

    def _function_named(self, handler: str) -> str:
        functions = self.stack.client("lambda").list_functions()["Functions"]
        (name,) = [f["FunctionName"] for f in functions if f["Handler"] == handler]
        return name

    def _point_links_here(self) -> None:
        # The functions the state machine calls are published versions (immutable): the local
        # stack's dispatcher gives them this server's URL in place of the API's.
        self.stack.dispatcher.stand_ins[env.ENV_APPROVAL_API_URL] = self.url
        # And the stack's output: every command against the served stack (`longstep approvals`,
        # `escalations`, `smoke`...) reads its links' base from DescribeStacks, as on AWS.
        self._api_url = self.stack.outputs.get(API_URL_OUTPUT)
        point_output(self.stack, API_URL_OUTPUT, self.url)


def point_output(stack: Any, key: str, value: str) -> None:
    """Make the local stack's output ``key`` say ``value`` (DescribeStacks and ``stack.outputs``)."""
    from moto.cloudformation.models import cloudformation_backends
    from moto.cloudformation.parsing import Output

    from longstep_kit.local.stack import ACCOUNT, REGION

    for deployed in cloudformation_backends[ACCOUNT][REGION].stacks.values():
        if deployed.name == stack.assembly.stack_name and key in deployed.output_map:
            before = deployed.output_map[key]
            deployed.output_map._parsed_outputs[key] = Output(key, value, before.description if before else "")
    stack.outputs[key] = value


def _handler_class(server: PageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the request line holds the link: never logged
            pass

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def _answer(self, method: str) -> None:
            path, _, query = self.path.partition("?")
            reason = server.door.refusal(method, path, query, {k.lower(): v for k, v in self.headers.items()})
            if reason is not None:
                status, headers, raw = server.door.refuse(reason)
                self.close_connection = True  # its body, if any, is left unread
                self._send(int(status.split()[0]), dict(headers), raw.decode())
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(413, {"Content-Type": "text/plain"}, "request too large")
                return
            body = self.rfile.read(length).decode("utf-8", "replace") if length else None
            event = proxy_event(method, self.path, {k: v for k, v in self.headers.items()}, body, self.client_address[0])
            if event is None:
                self._send(404, {"Content-Type": "text/plain"}, "no such page")
                return
            response = server.invoke(event)
            headers = {**(response.get("headers") or {}), **{k: v[-1] for k, v in (response.get("multiValueHeaders") or {}).items()}}
            self._send(int(response.get("statusCode", 502)), headers, response.get("body") or "")

        def _send(self, status: int, headers: dict[str, str], body: str) -> None:
            raw = body.encode("utf-8")
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler
