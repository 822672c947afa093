"""A Python suite with a session of its own (examples/sessions.yaml).

    go run ./cmd/doppel serve --config examples/sessions.yaml
    DOPPEL_PROXY=http://127.0.0.1:8080 DOPPEL_ADMIN=http://127.0.0.1:8081 \
        python3 -m unittest examples/sessions/test_catalog.py

setUp creates a session that makes the catalog fail its first two
attempts per Idempotency-Key; tearDown ends it. Only the standard library.
"""

import json
import os
import unittest
import urllib.error
import urllib.request

PROXY = os.environ.get("DOPPEL_PROXY", "http://127.0.0.1:8080")
ADMIN = os.environ.get("DOPPEL_ADMIN", "http://127.0.0.1:8081")
TOKEN = "sessions-example-token-0123456789ab"  # the example's: never a published one


def admin(method, path, body=None):
    req = urllib.request.Request(ADMIN + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("X-Proxy-Authorization", "Bearer " + TOKEN)
    with urllib.request.urlopen(req) as res:
        raw = res.read()
        return json.loads(raw) if raw else None


def status(url, headers):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as res:
            return res.status
    except urllib.error.HTTPError as e:
        return e.code


class CatalogRetries(unittest.TestCase):
    def setUp(self):
        self.session = admin("POST", "/api/v1/sessions", {"ttl": 60, "proxies": {"shop": {"mocks": [{
            "name": "catalog", "request": {"method": "GET", "url": "^/catalog$"},
            "response": {"status": 200, "body": "catalog"},
            "proxy": {"loss": {"percentage": 1.0, "status": 503,
                               "when": {"count": {"first": 2}, "per": {"header": "Idempotency-Key"}}}}}]}}})["id"]

    def tearDown(self):
        admin("DELETE", "/api/v1/sessions/" + self.session)

    def test_the_third_attempt_passes(self):
        headers = {"X-Doppel-Session": self.session, "Idempotency-Key": "py-1"}
        got = [status(PROXY + "/catalog", headers) for _ in range(3)]
        self.assertEqual(got, [503, 503, 200])

    def test_without_the_session_nothing_fails(self):
        self.assertEqual(status(PROXY + "/catalog", {"Idempotency-Key": "py-2"}), 200)


if __name__ == "__main__":
    unittest.main()
