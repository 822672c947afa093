"""Creating, listing, updating, deleting proxies; counters; record; status."""

import json
import urllib.request

import doppel


def test_a_proxy_goes_through_its_life(shop):
    rev = shop.client.create_proxy({"name": "extra", "url": "http://127.0.0.1:9",
                                    "resolve": {"type": "header", "header": "X-Backend"}})
    assert rev
    assert [p["proxy"]["name"] for p in shop.client.proxies()] == ["shop", "extra"]
    p, got = shop.client.proxy("extra")
    assert got == rev and p["type"] == "http"
    shop.client.delete_proxy("extra")
    assert [p["proxy"]["name"] for p in shop.client.proxies()] == ["shop"]
    assert [p["name"] for p in shop.client.status()["proxies"]] == ["shop"]


def test_reset_counters_starts_the_first_attempts_again(shop):
    def post() -> int:
        req = urllib.request.Request(shop.proxy_url + "/orders", data=b"{}", method="POST",
                                     headers={"Idempotency-Key": "k"})
        try:
            return urllib.request.urlopen(req).status
        except urllib.error.HTTPError as e:
            return e.code

    assert [post(), post(), post()] == [503, 503, 201]
    assert [c["count"] for c in shop.client.counters("shop")] == [3]
    shop.client.reset_counters("shop")
    assert shop.client.counters("shop") == []
    assert post() == 503


def test_record_shows_the_mocks_the_forwarded_exchanges_make(doppel_server, http_server):
    def handle(h):
        body = json.dumps({"items": [1, 2]}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    upstream = http_server(handle)
    server = doppel_server("""
server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081, public: true}
proxies:
  - {name: api, type: http, url: "%s"}
""" % upstream)
    assert json.load(urllib.request.urlopen(server.proxy_url + "/items")) == {"items": [1, 2]}
    preview = server.client.record("api", "^/items")
    assert preview["exchanges"] == 1
    assert [(m["request"]["method"], m["request"]["url"]) for m in preview["mocks"]][0][0] == "GET"
    p, rev = server.client.proxy("api")
    assert p.get("mocks", []) == []

    applied = server.client.record("api", "^/items", apply=True, revision=rev)
    assert len(server.client.proxy("api")[0]["mocks"]) == 1, applied
    assert isinstance(applied, dict)
    assert doppel.Client(server.admin_url).status()["revision"]
