"""The pytest plugin's fixtures, run as a user's suite would."""

import os
import time

import doppel

INNER = '''
import os, urllib.request
import pytest
import doppel

DOC = """
server: {host: 127.0.0.1, port: 8080}
admin: {host: 127.0.0.1, port: 8081, public: true}
proxies:
  - name: shop
    type: http
    url: http://127.0.0.1:9
    mocks:
      - {name: up, request: {method: GET, url: "^/catalog$"}, response: {status: 200, body: up}}
"""

def test_served(doppel_server, doppel_session):
    server = doppel_server(DOC)
    with open(os.environ["PID_FILE"], "w") as f:
        f.write(str(server.process.pid))
    assert urllib.request.urlopen(server.proxy_url + "/catalog").read() == b"up"
    assert server.client.status()["proxies"][0]["name"] == "shop"


@pytest.fixture(scope="module")
def shared():
    with doppel.DoppelServer(DOC) as server:
        yield server

def test_a_session(shared, doppel_session):
    s = doppel_session(shared, {"shop": {}}, ttl=60)
    assert [i["id"] for i in shared.client.sessions()] == [s.id]

def test_after_it_the_session_ended(shared):
    assert shared.client.sessions() == []

def test_invalid(doppel_server):
    doppel_server("server: {host: 127.0.0.1}\\nproxies: []\\n")
'''


def test_the_fixtures_start_stop_and_report_violations(pytester, tmp_path, monkeypatch):
    pid_file = tmp_path / "pid"
    monkeypatch.setenv("PID_FILE", str(pid_file))
    pytester.makepyfile(test_inner=INNER)
    began = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    assert time.monotonic() - began < 20
    # The invalid document fails with Doppel's own violations, not a timeout.
    result.stdout.fnmatch_lines(["*doppel exited with status 1 before it was ready*",
                                 "*server.port: is required*"])
    assert "not ready within" not in result.stdout.str()
    # The server was stopped when its test ended.
    pid = int(pid_file.read_text())
    for _ in range(100):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes: reaped by the inner pytest's exit.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_a_missing_binary_says_where_it_looked(doppel_server, monkeypatch, tmp_path):
    import pytest
    monkeypatch.setenv("DOPPEL_BIN", str(tmp_path / "nothing"))
    with pytest.raises(pytest.fail.Exception) as e:
        doppel_server("proxies: []")
    assert "DOPPEL_BIN" in str(e.value) and "nothing" in str(e.value)

    monkeypatch.delenv("DOPPEL_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception) as e:
        doppel_server("proxies: []")
    assert "DOPPEL_BIN is not set" in str(e.value) and "PATH" in str(e.value) and str(tmp_path) in str(e.value)


def test_stop_sends_sigterm_and_doppel_drains(tmp_path):
    from conftest import SHOP
    server = doppel.DoppelServer(SHOP)
    assert server.stop() == 0


def test_a_binary_that_cannot_run_says_so(doppel_server, monkeypatch, tmp_path):
    import pytest
    fake = tmp_path / "doppel"
    fake.write_bytes(b"\x7fELF not really")
    fake.chmod(0o755)
    monkeypatch.setenv("DOPPEL_BIN", str(fake))
    with pytest.raises(pytest.fail.Exception) as e:
        doppel_server("proxies: []")
    assert "cannot run %s" % fake in str(e.value)
