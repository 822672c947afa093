"""A real retrying client (requests with urllib3's Retry) through a loss
that fails the first two attempts of each Idempotency-Key, then verified."""

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

import doppel


def retrying_session(total: int) -> requests.Session:
    retry = Retry(total=total, status_forcelist=[503], allowed_methods=frozenset({"POST"}),
                  backoff_factor=0.05, respect_retry_after_header=True, raise_on_status=False)
    s = requests.Session()
    s.mount("http://", HTTPAdapter(max_retries=retry))
    return s


def test_retries_pass_on_the_third_attempt_after_retry_after(shop):
    resp = retrying_session(3).post(shop.proxy_url + "/orders", json={"item": 7},
                                    headers={"Idempotency-Key": "order-7"}, timeout=10)
    assert resp.status_code == 201
    assert resp.json() == {"created": True}

    got = shop.client.verify({"path": "^/orders$", "headers": {"Idempotency-Key": "^order-7$"}},
                             count=3, gaps_ms={"min": 1000}, same_header="Idempotency-Key")
    assert got["matched"] == 3
    assert len(got["gaps_ms"]) == 2 and min(got["gaps_ms"]) >= 1000
    statuses = [e["status"] for e in shop.client.requests(path="^/orders$")]
    assert statuses == [503, 503, 201]


def test_a_client_that_gives_up_too_soon_fails_the_verification(shop):
    resp = retrying_session(1).post(shop.proxy_url + "/orders", headers={"Idempotency-Key": "order-8"}, timeout=10)
    assert resp.status_code == 503
    assert doppel.read_error(resp.status_code, resp.content).code == "LOSS_INJECTED"

    try:
        shop.client.verify({"path": "^/orders$"}, count=3, same_header="Idempotency-Key")
    except doppel.VerificationFailed as e:
        assert e.matched == 2
        assert [r["status"] for r in e.requests] == [503, 503]
        assert "count" in e.message
    else:
        raise AssertionError("two attempts verified as three")
