"""A wrong URL, a refused connection, an answer that is not JSON, a
timeout: each a DoppelError naming the URL, never a bare KeyError."""

import socket
import threading
import time

import pytest

import doppel


@pytest.mark.parametrize("url", ["localhost:8081", "ftp://127.0.0.1:8081", "http://", "http://h:99999",
                                 "http://127.0.0.1:8081/?x=1", None])
def test_a_wrong_url_is_refused_at_once(url):
    with pytest.raises(doppel.InvalidURL) as e:
        doppel.Client(url)
    assert repr(url) in str(e.value)


def test_a_refused_connection_names_the_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(doppel.Unreachable) as e:
        doppel.Client("http://127.0.0.1:%d" % port).status()
    assert "http://127.0.0.1:%d/api/v1/status" % port in str(e.value)
    assert e.value.code is None and e.value.status is None


def test_an_answer_that_is_not_json_is_unexpected(http_server):
    def handle(h):
        status = 502 if h.path.startswith("/api/v1/proxies") else 200
        body = b"<html>a gateway's page</html>"
        h.send_response(status)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    url = http_server(handle)
    client = doppel.Client(url, token="never-printed")
    with pytest.raises(doppel.UnexpectedAnswer) as e:
        client.status()
    assert url + "/api/v1/status" in str(e.value) and "not JSON" in str(e.value) and e.value.status == 200
    with pytest.raises(doppel.UnexpectedAnswer) as e:
        client.proxies()
    assert e.value.status == 502 and "a gateway's page" in str(e.value)
    assert "never-printed" not in str(e.value)


def test_a_json_answer_without_the_documented_fields_is_unexpected(http_server):
    def handle(h):
        body = b'{"something": "else"}'
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    client = doppel.Client(http_server(handle))
    for call in (client.proxies, lambda: client.proxy("p"), lambda: client.requests(),
                 lambda: client.session({"p": {}})):
        with pytest.raises(doppel.UnexpectedAnswer) as e:
            call()
        assert "something" in str(e.value)


def test_a_timeout_names_the_url():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepted by the kernel, never answered
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    began = time.monotonic()
    try:
        with pytest.raises(doppel.TimedOut) as e:
            doppel.Client(url, timeout=0.3).status()
    finally:
        listener.close()
    assert url + "/api/v1/status" in str(e.value)
    assert time.monotonic() - began < 5


def test_an_unknown_filter_is_named():
    with pytest.raises(TypeError) as e:
        doppel.Client("http://127.0.0.1:1").requests(paht="^/x")
    assert "paht" in str(e.value)


def test_a_connect_that_times_out_names_the_url():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = []
    for _ in range(3):  # fill the backlog: the kernel drops the next SYN
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        queued.append(s)
    try:
        with pytest.raises(doppel.TimedOut) as e:
            doppel.Client("http://127.0.0.1:%d" % port, timeout=0.3).status()
    finally:
        for s in queued + [listener]:
            s.close()
    assert "http://127.0.0.1:%d/api/v1/status" % port in str(e.value)


def test_an_answer_that_is_not_http_is_unexpected():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]

    def answer():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
        conn.close()

    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        with pytest.raises(doppel.UnexpectedAnswer) as e:
            doppel.Client(url).status()
    finally:
        t.join(5)
        listener.close()
    assert url + "/api/v1/status" in str(e.value) and "HTTP" in str(e.value)


def test_an_empty_name_is_refused_before_any_call():
    with pytest.raises(ValueError):
        doppel.Client("http://127.0.0.1:1").proxy("")
