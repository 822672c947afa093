"""pytest fixtures: doppel_server and doppel_session (entry point pytest11)."""

from typing import Any, Callable, Iterator, List, Mapping, Optional

import pytest

from .client import Session
from .server import DoppelServer, StartFailed


@pytest.fixture
def doppel_server() -> Iterator[Callable[..., DoppelServer]]:
    """A factory: ``doppel_server(yaml_text, token=None)`` starts the doppel
    binary (DOPPEL_BIN, else PATH) on the document, its listeners on free
    loopback ports, and returns it ready, with ``proxy_url``, ``admin_url``
    and ``client``. It is stopped (SIGTERM) when the test ends."""
    started: List[DoppelServer] = []

    def start(yaml_text: str, token: Optional[str] = None) -> DoppelServer:
        try:
            server = DoppelServer(yaml_text, token=token)
        except StartFailed as e:
            why = e.message
        else:
            started.append(server)
            return server
        pytest.fail(why, pytrace=False)  # outside the except: no chained traceback

    yield start
    for server in reversed(started):
        server.stop()


@pytest.fixture
def doppel_session(doppel_server: Any) -> Iterator[Callable[..., Session]]:
    """A factory: ``doppel_session(server, proxies, ttl=60)`` starts a
    session over ``proxies`` (the overlay's map) for this test and ends it
    after (before any doppel_server stops). ``server`` is a doppel_server's,
    or a doppel.Client."""
    sessions: List[Session] = []

    def start(server: Any, proxies: Mapping[str, Any], ttl: int = 60) -> Session:
        client = getattr(server, "client", server)
        s: Session = client.session(proxies, ttl=ttl)
        sessions.append(s)
        return s

    yield start
    for s in reversed(sessions):
        s.end()
