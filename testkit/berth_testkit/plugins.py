"""A credential plugin for the tests (client-go's exec flow, KEP-541), as the reference
``secretreader`` of cluster-inventory-api reads a Secret: it reads the token from the
file its cluster's exec extension names (``KUBERNETES_EXEC_INFO``'s
``spec.cluster.config.tokenFile``, with ``provideClusterInfo: true``), and says it the
way it was asked (the request's ``apiVersion``)."""

from __future__ import annotations

from pathlib import Path

TEMPLATE = """import datetime, json, os, pathlib, sys
asked = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
path = pathlib.Path(asked["spec"]["cluster"]["config"]["tokenFile"])
if path.with_suffix(".broken").exists():
    sys.exit("the token store does not answer")
status = {"token": path.read_text()}
if LIFETIME is not None:
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=LIFETIME)
    status["expirationTimestamp"] = until.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({"apiVersion": asked["apiVersion"], "kind": "ExecCredential",
                  "status": status}))
"""


def token_reader(path: Path, lifetime: float | None = None) -> Path:
    """Write the plugin to ``path``: its tokens good for ``lifetime`` seconds (None: no
    expiry, so a client never runs it again while the token works); it fails, as a token
    store that does not answer, while a file ``<token file>.broken`` exists."""
    path.write_text(TEMPLATE.replace("LIFETIME", repr(lifetime)))
    return path
