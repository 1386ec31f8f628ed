"""Lower-level errors become the store's error tree at one boundary."""

from __future__ import annotations

import pytest
import requests

from berth.store.errors import (
    Answered,
    Invalid,
    StoreError,
    Unauthorized,
    Unavailable,
    Unreached,
    translate,
)


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (Unreached("refused"), Unavailable, "k: etcd unreachable: refused"),
        (Unreached("timed out"), Unavailable, "unreachable"),
        (requests.exceptions.ConnectionError("down"), Unavailable, "unreachable"),
        (Answered('{"error":"etcdserver: invalid auth token","code":16}', 400),
         Unauthorized, "k: etcdserver: invalid auth token"),
        (Answered('{"error":"etcdserver: permission denied","code":7}', 400),
         Unauthorized, "permission denied"),
        (Answered('{"error":"etcdserver: user name is empty","code":3}', 400),
         Unauthorized, "user name is empty"),
        (Answered('{"error":"etcdserver: too many operations in txn request",'
                           '"code":3}', 400), Invalid, "too many operations"),
        (Answered('{"error":"etcdserver: leader changed","code":14}', 400),
         Unavailable, "leader changed"),
        (Answered("<html>proxy error</html>", 500), StoreError, "proxy error"),
        (ValueError("Expecting value"), Invalid, "unexpected answer"),
    ],
)
def test_translation(exc: Exception, kind: type[StoreError], text: str) -> None:
    err = translate(exc, "k")
    assert type(err) is kind
    assert text in str(err)
