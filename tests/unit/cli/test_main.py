"""``berth``'s command line: only the subcommand that runs is imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from berth.cli.main import COMMANDS, chosen, parser


def _modules_after(*argv: str) -> set[str]:
    """The berth modules imported by ``berth ARGV`` (run in a fresh interpreter;
    SystemExit from --help/--version/usage errors is expected)."""
    code = (
        "import json, sys\n"
        "from berth.cli.main import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('berth'))),"
        " file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["get", "--help"]])
def test_version_and_help_import_only_what_they_show(argv: list[str]) -> None:
    loaded = _modules_after(*argv)
    assert not any(m.startswith("berth.controllers") for m in loaded), loaded
    if argv[0].startswith("--"):
        assert loaded == {"berth", "berth.cli", "berth.cli.main"}


def test_get_does_not_import_the_scheduler() -> None:
    loaded = _modules_after("get", "--help")
    assert "berth.cli.get_cmd" in loaded
    assert "berth.cli.explain_cmd" not in loaded


def test_the_subcommand_is_the_first_word_that_names_one() -> None:
    assert chosen(["--log-level", "DEBUG", "get", "apps"]) == "get"
    assert chosen(["explain", "application", "get"]) == "explain"
    assert chosen(["--version"]) is None


def test_every_subcommand_configures_and_has_the_etcd_options() -> None:
    p = parser("*")
    for name in COMMANDS:
        argv = {"cluster": ["cluster", "register", "x", "--kubeconfig", "k"],
                "bootstrap": ["bootstrap", "f.yaml"], "apply": ["apply", "-f", "f.yaml"],
                "get": ["get", "apps"], "describe": ["describe", "app", "web"],
                "cordon": ["cordon", "c1"], "uncordon": ["uncordon", "c1"],
                "wait": ["wait", "app", "web", "--for", "delete"],
                "completion": ["completion", "bash"],
                "rollout": ["rollout", "status", "web"], "history": ["history", "web"],
                "agent": ["agent", "--cluster", "edge/site-1"],
                "access": ["access", "show", "team-a"],
                }.get(name, [name])
        args = parser(name).parse_args([*argv, "--etcd", "http://127.0.0.1:1"])
        assert args.etcd == "http://127.0.0.1:1" and callable(args.run), name
        assert p.parse_args(argv).command == name


def test_an_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parser(chosen(["nonsense"])).parse_args(["nonsense"])
    assert exc.value.code == 2
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err
