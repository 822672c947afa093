"""Runs the doppel binary on a document, for a test: what the pytest
fixture doppel_server uses, and usable without pytest."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional

from .client import Client
from .errors import DoppelError


class StartFailed(DoppelError):
    """Doppel could not be started: no binary, or it refused the document
    (the message holds what it wrote to stderr), or it was not ready in time."""


def find_binary() -> str:
    """The doppel binary: DOPPEL_BIN, else the first doppel on PATH."""
    given = os.environ.get("DOPPEL_BIN")
    if given:
        if os.path.isfile(given) and os.access(given, os.X_OK):
            return given
        raise StartFailed("DOPPEL_BIN is %r, which is not an executable file" % given)
    found = shutil.which("doppel")
    if found:
        return found
    raise StartFailed("no doppel binary: DOPPEL_BIN is not set, and there is no doppel on PATH (%s); "
                      "build one with `go build -o /usr/local/bin/doppel ./cmd/doppel` or set DOPPEL_BIN"
                      % os.environ.get("PATH", ""))


class DoppelServer:
    """A doppel process serving one document on loopback ports of its own.

    ``proxy_url`` is its proxy listener, ``admin_url`` its admin API,
    ``client`` a :class:`doppel.Client` of it with the token given.
    """

    def __init__(self, yaml_text: str, token: Optional[str] = None, binary: Optional[str] = None,
                 ready_timeout: float = 15.0) -> None:
        self.binary = binary or find_binary()
        self.dir = tempfile.mkdtemp(prefix="doppel-")
        self.config_path = os.path.join(self.dir, "main.yaml")
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(yaml_text)
        self.proxy_url = ""
        self.admin_url = ""
        self._stdout = open(os.path.join(self.dir, "stdout.log"), "wb")
        self._stderr = open(os.path.join(self.dir, "stderr.log"), "wb")
        # Port 0: the kernel picks free ports as doppel binds them, and
        # its startup lines say which (no port is chosen before and raced
        # for). Its log at info, whatever the environment filters.
        env = dict(os.environ, DOPPEL_LOG="info")
        env.pop("RUST_LOG", None)
        try:
            self.process = subprocess.Popen(
                [self.binary, "serve", "--config", self.config_path,
                 "--proxy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
                 "--socket", os.path.join(self.dir, "control.sock")],
                stdin=subprocess.DEVNULL, stdout=self._stdout, stderr=self._stderr, env=env)
        except OSError as e:
            self._stdout.close()
            self._stderr.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            raise StartFailed("cannot run %s: %s" % (self.binary, e)) from None
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.stop()
            raise
        self.client = Client(self.admin_url, token=token, session_header=_session_header(yaml_text))

    def _wait_ready(self, timeout: float) -> None:
        # Ready once its log says where the admin API and the proxy
        # listener are bound: "doppel started" comes after both listen.
        deadline = time.monotonic() + timeout
        while True:
            code = self.process.poll()
            for line in self.stdout().splitlines():
                try:
                    fields = json.loads(line).get("fields", {})
                except (ValueError, AttributeError):
                    continue
                if not isinstance(fields, dict):
                    continue
                if fields.get("message") == "the admin API is listening" and fields.get("admin_addr"):
                    self.admin_url = "http://%s" % fields["admin_addr"]
                elif fields.get("message") == "doppel started" and fields.get("proxy_addr"):
                    self.proxy_url = "http://%s" % fields["proxy_addr"]
            if self.admin_url and self.proxy_url:
                return
            if code is not None:
                raise StartFailed("doppel exited with status %d before it was ready:\n%s"
                                  % (code, self.stderr().strip() or self.stdout().strip()))
            if time.monotonic() > deadline:
                raise StartFailed("doppel was not ready within %ss; its log:\n%s"
                                  % (timeout, self.stderr() + self.stdout()))
            time.sleep(0.05)

    def stdout(self) -> str:
        """What it wrote to stdout so far (its log)."""
        return _read(self._stdout.name)

    def stderr(self) -> str:
        """What it wrote to stderr so far (a refused document's violations)."""
        return _read(self._stderr.name)

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Stops it with SIGTERM (SIGKILL after ``timeout``) and returns its
        exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for f in (self._stdout, self._stderr):
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> "DoppelServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _session_header(yaml_text: str) -> str:
    # server.session_header, read without a YAML parser: the standard
    # library has none.
    m = re.search(r"""\bsession_header:\s*["']?([A-Za-z0-9!#$%&*+.^_`|~-]+)""", yaml_text)
    return m.group(1) if m else "X-Doppel-Session"


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
