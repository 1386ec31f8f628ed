"""The ``berth`` command's errors, as an operator meets them: which etcd, what to
set, one exit status per kind of failure, no tracebacks and no HTML."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from berth.cli.main import main
from berth.store import Store
from berth_testkit.scheduler_env import metric, value
from berth_testkit.servers.etcd import EtcdServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def web_page() -> Iterator[str]:
    """Something that is not etcd: a web server answering HTML."""
    class Page(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = b"<html><head><title>Welcome to nginx!</title></head><body>hi</body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_unreachable_etcd_names_the_url_and_how_to_set_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    assert main(["explain", "application", "default/x", "--etcd", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"berth explain: cannot reach etcd at {url} (from --etcd): ")
    assert err.rstrip().endswith("connection refused")
    assert "HTTPConnectionPool" not in err and "Traceback" not in err
    monkeypatch.setenv("BERTH_ETCD", url)
    assert main(["delete", "application", "default/x"]) == 1
    assert f"cannot reach etcd at {url} (from $BERTH_ETCD)" in capsys.readouterr().err


def test_the_default_url_is_said_to_be_the_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BERTH_ETCD", raising=False)
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 2379)) == 0:
            pytest.fail("something listens on 127.0.0.1:2379; this test needs it free")
    f = tmp_path / "m.yaml"
    f.write_text("api: core\nkind: GlobalMetric\nmetadata: {name: m}\n"
                 "spec: {min: 0, max: 1, provider: {name: p, metric: m}}\n")
    assert main(["bootstrap", "--quiet", str(f)]) == 1
    err = capsys.readouterr().err
    assert ("cannot reach etcd at http://127.0.0.1:2379 (the default; set another with "
            "--etcd URL or $BERTH_ETCD)") in err


def test_a_url_that_is_not_etcd_is_named_without_its_html(
    web_page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "application", "default/x", "--etcd", web_page]) == 1
    err = capsys.readouterr().err
    assert (f"{web_page}/v3/kv/range answered HTTP 404 Not Found (Welcome to nginx!), not "
            "etcd's JSON: is it etcd's gateway?") in err
    assert "<html>" not in err


def test_a_port_in_use_is_a_bad_option_not_a_traceback(
    etcd_server: EtcdServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["scheduler", "--http", f"127.0.0.1:{port}", "--etcd", etcd_server.url]) == 2
    err = capsys.readouterr().err
    assert f"berth scheduler: --http 127.0.0.1:{port}: cannot listen there: Address already " \
           "in use" in err
    assert "Traceback" not in err


def test_the_same_bad_option_is_the_same_exit_status_everywhere(
    capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["explain", "application", "x"], ["scheduler"], ["delete", "clusters", "x"],
                 ["bootstrap", "-"]):
        assert main([*argv, "--etcd", "not-a-url"]) == 2, argv  # explain said 1, scheduler 2
        assert "--etcd 'not-a-url': expected http(s)://host:port" in capsys.readouterr().err


def test_write_config_to_dash_is_standard_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["propagator", "--write-config-to", "-"]) == 0
    assert "resync_interval:" in capsys.readouterr().out
    assert not (tmp_path / "-").exists()  # it wrote a file named '-'


def test_log_level_in_any_case_and_after_the_subcommand(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "c.yaml"
    assert main(["--log-level", "debug", "scheduler", "--write-config-to", str(out)]) == 0
    assert main(["scheduler", "--log-level", "Warning", "--write-config-to", str(out)]) == 0
    with pytest.raises(SystemExit) as bad:
        main(["scheduler", "--log-level", "loud"])
    assert bad.value.code == 2


def test_help_names_every_etcd_variable_and_there_is_a_version(
    capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for var in ("$BERTH_ETCD ", "$BERTH_ETCD_CA", "$BERTH_ETCD_CERT", "$BERTH_ETCD_KEY",
                "$BERTH_ETCD_USER", "$BERTH_ETCD_PASSWORD"):
        assert var in text, var
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("berth ")


def test_log_format_json_is_one_object_per_line(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from berth_testkit.servers.etcd import ROOT

    proc = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "scheduler", "--log-format", "json",
         "--etcd", f"http://127.0.0.1:{closed_port()}", "--http", "127.0.0.1:0"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        while len(lines) < 6 and not any("is unreachable" in line for line in lines):
            lines.append(proc.stderr.readline())
    finally:
        proc.terminate()
        proc.wait(15)
        proc.stderr.close()
    said = [json.loads(line) for line in lines]
    assert {"time", "level", "logger", "message"} <= set(said[0])
    assert said[0]["time"].endswith("Z")
    assert any(s["level"] == "WARNING" and "is unreachable" in s["message"] for s in said), said


def test_a_reader_that_stops_early_gets_no_traceback(etcd_server: EtcdServer) -> None:
    """`berth get ... | head -1`: the pipe closes under the command."""
    import subprocess
    import sys

    from berth.store import EtcdConfig, Store, encode, keys
    from berth_testkit.servers.etcd import ROOT

    store = Store(EtcdConfig(url=etcd_server.url))
    for i in range(300):
        key = keys.resource_key("GlobalMetric", f"pipe-{i:03d}")
        if store.get(key) is None:
            store.create(key, encode({"api": "core", "kind": "GlobalMetric",
                                      "metadata": {"name": f"pipe-{i:03d}"},
                                      "spec": {"min": 0, "max": 1,
                                               "provider": {"name": "p", "metric": "m"}}}))
    store.close()
    done = subprocess.run(
        f"{sys.executable} -m berth.cli.main get globalmetrics -o yaml --etcd {etcd_server.url}"
        " | head -1", shell=True, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_get_metrics_shows_the_value_normalised_as_the_scheduler_scores_it(
    etcd_server: EtcdServer, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """The metrics-cache normalised the value with the min/max of its poll; the definition
    changed since: the scheduler scores with today's, and so does ``berth get``."""
    metric(store, "heat", 0, 10)
    value(store, "heat", 5, 0, 10)  # stored normalized: 0.5
    metric(store, "heat", 0, 20)  # max raised since
    assert main(["get", "gm", "-o", "wide", "--etcd", etcd_server.url]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:3] == ["heat", "5", "0.250"]
