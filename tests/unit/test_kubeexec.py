"""A kubeconfig's exec plugin as berth runs it: real plugin processes (small Python
programs written by each test), a clock the test moves. What client-go checks of an
answer is checked (its messages, where berth keeps them); where berth differs — a
bound on time, tokens only, never interactive — it says so.

(On a real kube-apiserver, calls and a watch through a plugin, with a 401 and an
expiry: tests/integration/test_kube_http.py.)"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from berth.controllers.propagator.kube import Connection
from berth.kubeexec import EXEC_INFO, EXTENSION, ExecError, ExecPlugin, plugin_of

V1 = "client.authentication.k8s.io/v1"
BETA = "client.authentication.k8s.io/v1beta1"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def plugin(tmp_path: Path, body: str, **stanza: Any) -> dict[str, Any]:
    """An exec stanza running ``body`` (Python; ``runs`` counts its runs in a file, and
    ``say(status)`` prints an ExecCredential of the version asked for)."""
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, pathlib, sys, time\n"
        f"runs = pathlib.Path({str(tmp_path / 'runs')!r})\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        "asked = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "def say(status, version=None):\n"
        "    print(json.dumps({'apiVersion': version or asked['apiVersion'],\n"
        "                      'kind': 'ExecCredential', 'status': status}))\n"
        + body + "\n")
    return {"apiVersion": V1, "command": sys.executable, "args": [str(script)], **stanza}


def runs(tmp_path: Path) -> int:
    f = tmp_path / "runs"
    return len(f.read_text()) if f.exists() else 0


def test_a_token_is_kept_until_it_expires_then_the_plugin_runs_again(tmp_path: Path) -> None:
    clock = Clock()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock.now + 60))
    p = ExecPlugin(plugin(tmp_path, f"say({{'token': 't' + str(len(runs.read_text())), "
                                    f"'expirationTimestamp': {stamp!r}}})"),
                   {"server": "https://x"}, clock=clock)
    assert [p.token(), p.token()] == ["t1", "t1"] and runs(tmp_path) == 1
    clock.now += 60
    assert p.token() == "t1"  # at its expiry: not yet past it (client-go's rule)
    clock.now += 0.5
    assert p.token() == "t2" and runs(tmp_path) == 2


def test_a_token_without_expiry_is_kept_until_the_cluster_refuses_it(tmp_path: Path) -> None:
    p = ExecPlugin(plugin(tmp_path, "say({'token': 't' + str(len(runs.read_text()))})",
                          apiVersion=BETA), {})
    assert p.token() == "t1"
    p.refused("an older token")  # another thread's: nothing to do
    assert p.token() == "t1" and runs(tmp_path) == 1
    p.refused("t1")
    assert p.token() == "t2" and runs(tmp_path) == 2


def test_it_is_told_it_is_not_interactive_and_which_cluster_when_asked(tmp_path: Path) -> None:
    body = (f"pathlib.Path({str(tmp_path / 'asked')!r}).write_text(json.dumps(asked))\n"
            "print(os.environ['FROM_KUBECONFIG'], file=open("
            f"{str(tmp_path / 'env')!r}, 'w'))\n"
            "say({'token': 't'})")
    cluster = {"server": "https://hub:6443", "certificate-authority-data": "Q0E=",
               "tls-server-name": "hub", "extensions": [
                   {"name": "other", "extension": {"no": 1}},
                   {"name": EXTENSION, "extension": {"clusterName": "spoke-1"}}]}
    p = ExecPlugin(plugin(tmp_path, body, provideClusterInfo=True,
                          env=[{"name": "FROM_KUBECONFIG", "value": "yes"}]), cluster)
    assert p.token() == "t"
    asked = json.loads((tmp_path / "asked").read_text())
    assert asked == {"apiVersion": V1, "kind": "ExecCredential", "spec": {
        "interactive": False, "cluster": {
            "server": "https://hub:6443", "certificate-authority-data": "Q0E=",
            "tls-server-name": "hub", "config": {"clusterName": "spoke-1"}}}}
    assert (tmp_path / "env").read_text().strip() == "yes"
    without = ExecPlugin(plugin(tmp_path, body, env=[{"name": "FROM_KUBECONFIG",
                                                      "value": "yes"}]), cluster)
    without.token()
    assert json.loads((tmp_path / "asked").read_text())["spec"] == {"interactive": False}


def test_a_cas_file_goes_to_the_plugin_as_data(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"CA")
    p = ExecPlugin(plugin(tmp_path, "say({'token': 't'})", provideClusterInfo=True),
                   {"server": "https://x", "certificate-authority": str(ca)})
    assert json.loads(p.env[EXEC_INFO])["spec"]["cluster"]["certificate-authority-data"] \
        == "Q0E="


@pytest.mark.parametrize(("body", "said"), [
    ("say({'token': 't'}, version='client.authentication.k8s.io/v1beta1')",
     "is configured to use API version client.authentication.k8s.io/v1, plugin returned "
     "version 'client.authentication.k8s.io/v1beta1'"),
    ("print(json.dumps({'apiVersion': asked['apiVersion'], 'kind': 'ExecCredential'}))",
     "didn't return a status field"),
    ("say({})", "didn't return a token or cert/key pair"),
    ("say({'clientCertificateData': 'C', 'clientKeyData': 'K'})",
     "returned a client certificate: berth takes tokens from exec plugins only"),
    ("say({'token': 't', 'expirationTimestamp': 'soon'})",
     "expirationTimestamp 'soon' is not an RFC 3339 time"),
    ("print('<html>login</html>')", "its output is not JSON"),
    ("print(json.dumps({'kind': 'Secret'}))", "its output is no ExecCredential"),
    ("print('a secret-looking line', file=sys.stderr)\n"
     "print('token expired: run login', file=sys.stderr)\nsys.exit(3)",
     "failed with exit code 3: token expired: run login"),
])
def test_an_answer_that_is_no_usable_credential_is_said(tmp_path: Path, body: str,
                                                        said: str) -> None:
    p = ExecPlugin(plugin(tmp_path, body), {})
    with pytest.raises(ExecError) as caught:
        p.token()
    assert str(caught.value) == f"exec plugin {sys.executable} {said}".replace(
        f"{sys.executable} its", f"{sys.executable}: its").replace(
        f"{sys.executable} expirationTimestamp", f"{sys.executable}: expirationTimestamp")
    assert "secret-looking" not in str(caught.value)


def test_a_plugin_that_hangs_is_stopped_in_bounded_time_with_what_it_started(
        tmp_path: Path) -> None:
    child = tmp_path / "child.pid"
    body = ("import subprocess\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"pathlib.Path({str(child)!r}).write_text(str(c.pid))\n"
            "time.sleep(60)")
    p = ExecPlugin(plugin(tmp_path, body), {}, timeout=1.0)
    began = time.monotonic()
    with pytest.raises(ExecError, match=r"gave no credential within 1 s: stopped"):
        p.token()
    assert time.monotonic() - began < 5
    pid = int(child.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
        assert time.monotonic() < deadline, "the plugin's child outlived it"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_a_command_that_cannot_be_run_says_its_install_hint(tmp_path: Path) -> None:
    p = ExecPlugin({"apiVersion": V1, "command": str(tmp_path / "absent"),
                    "installHint": "install it with: go install example.com/plugin\n"}, {})
    with pytest.raises(ExecError, match=r"could not be run: No such file or directory "
                                        r"\(install it with: go install example.com/plugin\)"):
        p.token()


@pytest.mark.parametrize(("stanza", "said"), [
    ({"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "p"},
     "apiVersion client.authentication.k8s.io/v1alpha1 was removed in Kubernetes 1.24"),
    ({"apiVersion": "v2", "command": "p"}, "apiVersion 'v2' is none of"),
    ({"apiVersion": V1, "command": "p", "interactiveMode": "Always"},
     "interactiveMode Always needs a terminal, and berth runs unattended"),
    ({"apiVersion": V1}, "the user's exec names no command"),
    ({"apiVersion": V1, "command": "p", "args": "--all"}, "args is not a list of strings"),
    ({"apiVersion": V1, "command": "p", "env": [{"name": "A"}]},
     "an env entry is not a name and a value"),
])
def test_a_stanza_berth_cannot_use_is_refused_when_read(stanza: dict[str, Any],
                                                        said: str) -> None:
    with pytest.raises(ExecError, match=said.replace("(", r"\(")):
        ExecPlugin(stanza, {})


def test_the_plugin_is_the_current_contexts_users() -> None:
    config = {
        "current-context": "b",
        "clusters": [{"name": "one", "cluster": {"server": "https://one"}}],
        "contexts": [{"name": "a", "context": {"cluster": "one", "user": "tok"}},
                     {"name": "b", "context": {"cluster": "one", "user": "ex"}}],
        "users": [{"name": "tok", "user": {"token": "t"}},
                  {"name": "ex", "user": {"exec": {"apiVersion": V1, "command": "p",
                                                   "provideClusterInfo": True}}}]}
    found = plugin_of(config, "b")
    assert found is not None and found.command == "p"
    assert json.loads(found.env[EXEC_INFO])["spec"]["cluster"] == {"server": "https://one"}
    assert plugin_of(config, "a") is None


def test_a_plugin_that_fails_makes_its_cluster_unhealthy_saying_why(tmp_path: Path) -> None:
    """Nothing is sent without a credential; the probe says the cluster's credentials
    fail (UNHEALTHY, as a refused token is), not that it is unreachable."""
    config = {"current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
              "users": [{"name": "u", "user": {"exec": plugin(
                  tmp_path, "print('no such account', file=sys.stderr)\nsys.exit(1)")}}]}
    probe = Connection(config, 1.0).probe(1.0)
    assert (probe.state, probe.reason) == (
        "UNHEALTHY", f"credentials: authenticating: exec plugin {sys.executable} failed with "
                     "exit code 1: no such account")


def test_a_plugin_that_failed_is_not_run_again_for_a_while_its_failure_said_meanwhile(
        tmp_path: Path) -> None:
    """Each call waiting for a failing (or hanging) plugin again would hold every thread
    that reaches the cluster: for ``retry_after`` seconds its failure is said at once."""
    ticks = Clock()
    flag = tmp_path / "works"
    p = ExecPlugin(plugin(tmp_path, f"if not pathlib.Path({str(flag)!r}).exists(): "
                                    "sys.exit(1)\nsay({'token': 't'})"),
                   {}, retry_after=5.0, ticks=ticks)
    for _ in range(3):
        with pytest.raises(ExecError, match="failed with exit code 1"):
            p.token()
    assert runs(tmp_path) == 1
    flag.write_text("yes")
    ticks.now += 4.9
    with pytest.raises(ExecError):
        p.token()
    ticks.now += 0.2
    assert p.token() == "t" and runs(tmp_path) == 2
