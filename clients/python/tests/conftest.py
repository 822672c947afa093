"""Shared documents and servers. The doppel fixtures come from the
installed package's pytest plugin."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, Tuple

import pytest

pytest_plugins = ["pytester"]

# A test token, published here on purpose: never a real one.
TOKEN = "python-client-tests-0123456789abcdef"

SHOP = """
server: {host: 127.0.0.1, port: 8080}
admin:
  host: 127.0.0.1
  port: 8081
  tokens:
    - {name: tests, group: admin, token: %s}
proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9
    mocks:
      - name: orders
        request: {method: POST, url: "^/orders$"}
        response: {status: 201, json: '{"created": true}'}
        proxy:
          loss:
            percentage: 1.0
            status: 503
            retry_after: 1
            when: {count: {first: 2}, per: {header: Idempotency-Key}}
      - name: catalog
        request: {method: GET, url: "^/catalog$"}
        response: {status: 200, body: catalog}
""" % TOKEN


@pytest.fixture
def shop(doppel_server):
    """Doppel serving SHOP, with a client holding its admin token."""
    return doppel_server(SHOP, token=TOKEN)


@pytest.fixture
def http_server() -> Iterator[Callable[[Callable[[BaseHTTPRequestHandler], None]], str]]:
    """A factory: http_server(handle) serves GET and POST with handle on a
    loopback port and returns its URL; stopped after the test."""
    servers = []

    def start(handle: Callable[[BaseHTTPRequestHandler], None]) -> str:
        class Handler(BaseHTTPRequestHandler):
            do_GET = do_POST = do_PUT = do_DELETE = handle

            def log_message(self, *args: object) -> None:
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return "http://127.0.0.1:%d" % srv.server_address[1]

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()
