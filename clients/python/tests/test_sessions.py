"""Sessions: an overlay only the requests carrying its header get."""

import urllib.error
import urllib.request

import pytest

import doppel

DOWN = {"shop": {"mocks": [{"name": "down", "request": {"method": "GET", "url": "^/catalog$"},
                            "response": {"status": 503, "body": "down for this test"}}]}}


def get(url, headers=None):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_session_applies_to_its_requests_and_ends_on_exit(shop):
    with shop.client.session(DOWN, ttl=30) as s:
        assert len(s.id) == 22 and s.headers == {"X-Doppel-Session": s.id}
        assert get(shop.proxy_url + "/catalog", s.headers) == 503
        assert get(shop.proxy_url + "/catalog") == 200
        mine = shop.client.requests(session=s.id)
        assert [(e["status"], e["session"]) for e in mine] == [(503, s.id)]
        assert shop.client.verify({"session": s.id}, count=1)["matched"] == 1
    assert get(shop.proxy_url + "/catalog", s.headers) == 200
    with pytest.raises(doppel.NotFound):
        shop.client.end_session(s.id)


def test_a_session_names_only_proxies_that_exist(shop):
    with pytest.raises(doppel.ConfigInvalid) as e:
        shop.client.session({"nowhere": {}})
    assert "nowhere" in e.value.message


def test_the_session_header_follows_the_document(doppel_server):
    server = doppel_server("""
server: {host: 127.0.0.1, port: 8080, session_header: X-Suite}
admin: {host: 127.0.0.1, port: 8081, public: true}
proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9
    mocks:
      - {name: up, request: {method: GET, url: "^/catalog$"}, response: {status: 200}}
""")
    with server.client.session(DOWN) as s:
        assert s.headers == {"X-Suite": s.id}
        assert get(server.proxy_url + "/catalog", s.headers) == 503
