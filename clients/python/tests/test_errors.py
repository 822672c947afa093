"""Doppel's error answers as typed errors."""

import pytest

import doppel


def test_a_stale_revision_is_a_revision_mismatch(shop):
    p, rev = shop.client.proxy("shop")
    assert p["name"] == "shop" and rev
    p["timeout"] = 5
    new = shop.client.update_proxy(p, rev)
    assert new != rev
    assert shop.client.proxy("shop")[0]["timeout"] == 5

    p["timeout"] = 7
    with pytest.raises(doppel.RevisionMismatch) as e:
        shop.client.update_proxy(p, rev)
    assert isinstance(e.value, doppel.DoppelError)
    assert (e.value.code, e.value.status) == ("REVISION_MISMATCH", 409)
    assert e.value.message and e.value.operation == "updateProxy"
    assert shop.client.proxy("shop")[0]["timeout"] == 5


def test_an_unknown_proxy_is_not_found(shop):
    with pytest.raises(doppel.NotFound) as e:
        shop.client.proxy("nowhere")
    assert (e.value.code, e.value.status) == ("NOT_FOUND", 404)
    with pytest.raises(doppel.NotFound):
        shop.client.delete_proxy("nowhere")


def test_a_verification_that_does_not_hold_carries_the_entries(shop):
    import urllib.request
    for _ in range(2):
        urllib.request.urlopen(shop.proxy_url + "/catalog").read()
    with pytest.raises(doppel.VerificationFailed) as e:
        shop.client.verify({"method": "GET", "path": "^/catalog$"}, count=(3, None))
    assert (e.value.code, e.value.status) == ("VERIFICATION_FAILED", 409)
    assert e.value.matched == 2
    assert [r["path"] for r in e.value.requests] == ["/catalog", "/catalog"]
    assert shop.client.verify({"path": "^/catalog$"}, count=2)["matched"] == 2


def test_a_document_breaking_a_rule_is_config_invalid(shop):
    with pytest.raises(doppel.ConfigInvalid) as e:
        shop.client.create_proxy({"name": "bad", "url": "not a url"})
    assert e.value.status == 400 and "url" in e.value.message
    with pytest.raises(doppel.Conflict):
        shop.client.create_proxy({"name": "shop", "url": "http://127.0.0.1:9"})


def test_without_the_token_the_call_is_unauthorized(shop):
    anonymous = doppel.Client(shop.admin_url)
    with pytest.raises(doppel.Unauthorized) as e:
        anonymous.proxies()
    assert e.value.status == 401
    assert "tests" not in str(e.value) and "python-client-tests" not in repr(shop.client)


def test_a_proxy_listener_answer_reads_as_its_code(shop):
    import urllib.error
    import urllib.request
    req = urllib.request.Request(shop.proxy_url + "/orders", data=b"{}", method="POST",
                                 headers={"Idempotency-Key": "read-error"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    err = doppel.read_error(e.value.code, e.value.read())
    assert isinstance(err, doppel.LossInjected) and err.status == 503
    assert doppel.read_error(502, b"<html>bad gateway</html>") is None
