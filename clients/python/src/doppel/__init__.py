"""A client of Doppel's admin API, and pytest fixtures that run Doppel.

    import doppel
    client = doppel.Client("http://127.0.0.1:8081", token="...")
    client.verify({"path": "^/orders$"}, count=3, same_header="Idempotency-Key")

Every failure is a :class:`DoppelError`, one subclass per code of Doppel's
closed set (``RevisionMismatch``, ``NotFound``, ``VerificationFailed``, ...).
"""

from .client import OPERATIONS, Client, Operation, Session
from .errors import *  # noqa: F401,F403: one class per code
from .errors import BY_CODE, DoppelError, read_error
from .server import DoppelServer, StartFailed, find_binary

__all__ = ["Client", "Session", "Operation", "OPERATIONS", "DoppelError", "BY_CODE", "read_error",
           "DoppelServer", "StartFailed", "find_binary"] + [
    c.__name__ for c in BY_CODE.values()] + ["InvalidURL", "Unreachable", "TimedOut", "UnexpectedAnswer"]
__version__ = "0.1.0"
