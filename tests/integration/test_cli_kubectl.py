"""The ``berth`` command as kubectl users use it, against a real etcd: templates,
several names, sorting, ``wait``, namespaces and short kinds everywhere, completion."""

from __future__ import annotations

import contextlib
import io
import subprocess
import threading
import time

import pytest

from berth.cli.main import main
from berth.store import Store, encode, keys
from berth.store.documents import (
    ApplicationState,
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingStatus,
    ObjectRef,
    StatusMeta,
    Target,
)
from berth_testkit.scheduler_env import application, put


def berth(*argv: str, store: Store) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([*argv, "--etcd", store.config.url])
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def placed(store: Store, name: str, *on: str, namespace: str = "default",
           state: str = "RUNNING") -> None:
    put(store, keys.binding_key("Application", namespace, name), encode(Binding(
        BindingMeta(name, namespace), BindingSpec(ObjectRef("Application", name, namespace), 1,
                                                  [Target("Cluster", c, namespace, 0.5, 2)
                                                   for c in on]),
        BindingStatus("Scheduled", "2/2 clusters are available"))))
    put(store, keys.status_key("Application", namespace, name), encode(ApplicationStatus(
        StatusMeta(name, namespace), ApplicationState(state=state))))


@pytest.fixture
def apps(store: Store) -> Store:
    application(store, "web", labels={"tier": "front"})
    application(store, "api")
    application(store, "db", namespace="prod", pace={
        "inTransition": 0, "windows": [{"start": "08:00", "end": "20:00", "days": ["Mon"]}]})
    placed(store, "web", "east", "west")
    placed(store, "api", "east", state="PROGRESSING")
    return store


def test_jsonpath_custom_columns_and_yaml_with_status(apps: Store) -> None:
    code, out, _ = berth("get", "apps", "-o", "jsonpath={.items[*].metadata.name}",
                         store=apps)
    assert (code, out) == (0, "api web\n")
    code, out, _ = berth("get", "app", "web", "-o",
                         "jsonpath={.status.propagation.state} {.status.placement.targets[*].name}",
                         store=apps)
    assert out == "RUNNING east west\n"
    code, out, _ = berth("get", "apps", "-o",
                         "custom-columns=NAME:.metadata.name,STATE:.status.propagation.state,"
                         "TIER:.metadata.labels.tier", "--no-headers", store=apps)
    assert [line.split() for line in out.splitlines()] == [
        ["api", "PROGRESSING", "<none>"], ["web", "RUNNING", "front"]]
    code, out, _ = berth("get", "app", "web", "-o", "yaml", store=apps)
    assert "status:\n  placement:\n    state: Scheduled" in out
    assert "  propagation:\n    state: RUNNING" in out and "explanation" not in out


def test_several_names_sorting_and_a_missing_one(apps: Store) -> None:
    code, out, err = berth("get", "apps", "web", "api", "ghost", "--sort-by",
                           ".metadata.name", store=apps)
    assert code == 1 and "application default/ghost not found" in err
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names == ["api", "web"]
    code, out, _ = berth("get", "apps", "--sort-by", "{.status.propagation.state}",
                         "-o", "name", store=apps)
    assert out.split() == ["application/default/api", "application/default/web"]
    code, _, err = berth("get", "apps", "-o", "jsonpath={.items[?(@.x)]}", store=apps)
    assert code == 2  # refused before anything is read


def test_namespaces_and_short_kinds_in_every_subcommand(apps: Store) -> None:
    placed(apps, "db", "vault", namespace="prod")
    code, out, _ = berth("explain", "app", "db", "-n", "prod", store=apps)
    assert code == 0 and out.startswith("Application prod/db: Scheduled")
    assert "targets: Cluster prod/vault (2 replicas, score 0.5000)" in out
    code, out, _ = berth("describe", "apps", "db", "-n", "prod", store=apps)
    assert code == 0 and "Name:        prod/db" in out
    assert "Pace:        its own over the fleet's: inTransition 0, windows 08:00-20:00 Mon" in out
    code, _, err = berth("explain", "metric", "x", store=apps)
    assert code == 2 and "explain takes Application, Cluster, MagnumCluster" in err


def test_wait_for_a_state_with_a_timeout_and_for_delete(apps: Store) -> None:
    code, out, _ = berth("wait", "app", "web", "--for", "state=RUNNING", store=apps)
    assert code == 0 and "application/default/web condition met (state=RUNNING)" in out
    code, _, err = berth("wait", "app", "api", "--for", "state=RUNNING", "--timeout", "1s",
                         store=apps)
    assert code == 1 and "timed out waiting for the condition (state=RUNNING) on " \
                         "applications/default/api" in err
    later = threading.Timer(0.7, lambda: placed(apps, "api", "east"))
    later.start()
    began = time.monotonic()
    code, _, _ = berth("wait", "app", "api", "web", "--for",
                       "jsonpath={.status.propagation.state}=RUNNING", "--timeout", "10",
                       store=apps)
    assert code == 0 and time.monotonic() - began >= 0.5
    threading.Timer(0.5, lambda: apps.delete(keys.resource_key("Application", "api",
                                                                "default"))).start()
    assert berth("wait", "app", "api", "--for", "delete", store=apps)[0] == 0
    assert berth("wait", "app", "nobody", "--for", "ready", store=apps)[0] == 1
    assert berth("wait", "app", "web", "--for", "bogus", store=apps)[0] == 2


def test_type_slash_name_wherever_a_kind_and_a_name_are_taken(apps: Store) -> None:
    """kubectl's TYPE/NAME form (``get app/web``, ``wait app/web``), with the kinds free to
    differ; a namespace after the type; refused mixed with a separate KIND, as kubectl
    refuses it."""
    put(apps, keys.resource_key("Cluster", "east", "default"), encode({
        "api": "kubernetes", "kind": "Cluster", "metadata": {"name": "east",
                                                             "namespace": "default"},
        "spec": {"kubeconfig": {}}}))
    code, out, _ = berth("get", "app/web", "applications/prod/db", "-o", "name", store=apps)
    assert (code, out.split()) == (0, ["application/default/web", "application/prod/db"])
    code, out, _ = berth("get", "app/web", "cluster/east", store=apps)
    tables = out.split("\n\n")
    assert code == 0 and len(tables) == 2, out
    assert tables[0].splitlines()[1].split()[0] == "web"
    assert tables[1].splitlines()[1].split()[0] == "east"
    code, out, _ = berth("get", "app/web", "cluster/east", "-o", "json", store=apps)
    assert code == 0 and '"kind": "List"' in out and '"name": "east"' in out
    code, out, _ = berth("get", "app/web", "-o", "json", store=apps)
    assert code == 0 and '"kind": "List"' not in out  # one named: the document
    code, out, _ = berth("describe", "app/prod/db", store=apps)
    assert code == 0 and "Name:        prod/db" in out
    code, out, _ = berth("wait", "app/web", "--for", "state=RUNNING", store=apps)
    assert code == 0 and "application/default/web condition met" in out
    code, out, _ = berth("explain", "app/web", store=apps)
    assert code == 0 and out.startswith("Application default/web: Scheduled")
    code, _, err = berth("get", "app", "app/web", store=apps)  # after KIND: NAMESPACE/NAME
    assert code == 1 and "application app/web not found" in err
    code, _, err = berth("get", "app/web", "api", store=apps)
    assert code == 2 and "'api': after 'app/web' give each as TYPE/NAME too (e.g. app/api)" in err
    code, _, err = berth("describe", "app/", store=apps)
    assert code == 2 and "TYPE/NAME or TYPE/NAMESPACE/NAME" in err
    code, _, err = berth("describe", "nokind/web", store=apps)
    assert code == 2 and "unknown kind 'nokind'" in err
    code, out, err = berth("delete", "app/api", store=apps)
    kv = apps.get(keys.resource_key("Application", "api", "default"))
    assert code == 0 and kv is not None and b'"deleted"' in kv.value  # marked, as ever
    code, out, err = berth("rollout", "history", "app/web", store=apps)
    assert "default/web" in out + err and "app/web" not in out + err


def test_completion_scripts_complete_subcommands_kinds_and_options(apps: Store) -> None:
    code, script, _ = berth("completion", "bash", store=apps)
    assert code == 0
    probe = script + (
        'COMP_WORDS=(berth ge); COMP_CWORD=1; _berth; echo "${COMPREPLY[*]}"\n'
        'COMP_WORDS=(berth get ap); COMP_CWORD=2; _berth; echo "${COMPREPLY[*]}"\n'
        'COMP_WORDS=(berth get --no); COMP_CWORD=2; _berth; echo "${COMPREPLY[*]}"\n')
    lines = subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                           check=True, timeout=30).stdout.splitlines()
    assert lines == ["get", "app application applications apps", "--no-headers"]
    code, script, _ = berth("completion", "zsh", store=apps)
    assert script.startswith("autoload -U +X bashcompinit && bashcompinit\n")
