"""An HTTP session for talking to other services (providers, extenders).

``trust_env=False``: on these machines ``REQUESTS_CA_BUNDLE`` (and any proxy
variable) would silently override what berth was told; explicit settings win.
"""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter


def session(pool_size: int = 10) -> requests.Session:
    s = requests.Session()
    s.trust_env = False
    adapter = HTTPAdapter(pool_connections=2, pool_maxsize=pool_size)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s
