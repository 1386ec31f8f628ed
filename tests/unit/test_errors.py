"""Lower-level errors become the store's error tree at one boundary."""

from __future__ import annotations

import pytest
import requests
from etcd3gw import exceptions as gw

from berth.store.errors import (
    Invalid,
    StoreError,
    Unauthorized,
    Unavailable,
    translate,
)


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (gw.ConnectionFailedError("refused"), Unavailable, "k: etcd unreachable: refused"),
        (gw.ConnectionTimeoutError("slow"), Unavailable, "unreachable"),
        (requests.exceptions.ConnectionError("down"), Unavailable, "unreachable"),
        (gw.Etcd3Exception('{"error":"etcdserver: invalid auth token","code":16}'),
         Unauthorized, "k: etcdserver: invalid auth token"),
        (gw.Etcd3Exception('{"error":"etcdserver: permission denied","code":7}'),
         Unauthorized, "permission denied"),
        (gw.Etcd3Exception('{"error":"etcdserver: user name is empty","code":3}'),
         Unauthorized, "user name is empty"),
        (gw.Etcd3Exception('{"error":"etcdserver: too many operations in txn request",'
                           '"code":3}'), Invalid, "too many operations"),
        (gw.Etcd3Exception('{"error":"etcdserver: leader changed","code":14}'),
         Unavailable, "leader changed"),
        (gw.Etcd3Exception("<html>proxy error</html>"), StoreError, "proxy error"),
        (ValueError("Expecting value"), Invalid, "unexpected answer"),
    ],
)
def test_translation(exc: Exception, kind: type[StoreError], text: str) -> None:
    err = translate(exc, "k")
    assert type(err) is kind
    assert text in str(err)
