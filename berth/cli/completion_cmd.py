"""``berth completion bash|zsh``: a shell completion script, as ``kubectl completion``.

``source <(berth completion bash)`` (zsh: ``source <(berth completion zsh)``,
which loads bash's completion support). It completes subcommands, each one's
options (read from berth's own parser, so they never drift), kinds after
``get``, ``describe``, ``explain``, ``delete`` and ``wait``, and resource names
after a kind by asking ``berth get KIND -o jsonpath`` (with the etcd options
in the environment: ``BERTH_ETCD`` and friends).
"""

from __future__ import annotations

import argparse
import shlex

from berth.cli.kinds import SHORT
from berth.store import keys

WITH_KINDS = ("get", "describe", "explain", "delete", "wait")


def configure(p: argparse.ArgumentParser, _name: str) -> None:
    """``berth completion``'s arguments (its one-line help is in :data:`cli.main.COMMANDS`)."""
    p.description = ("Print a completion script: source <(berth completion bash), or zsh.")
    p.add_argument("shell", choices=["bash", "zsh"])
    p.set_defaults(run=run)


def script(shell: str) -> str:
    from berth.cli.main import COMMANDS, parser

    full = parser("*")
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    options = {name: sorted({o for action in p._actions for o in action.option_strings})
               for name, p in sub.choices.items()}
    kinds = sorted({k.plural for k in keys.KINDS.values()} | {
        k.name.lower() for k in keys.KINDS.values()} | set(SHORT))
    cases = "\n".join(f"      {name}) opts={shlex.quote(' '.join(opts))} ;;"
                      for name, opts in sorted(options.items()))
    body = f"""# berth completion for {shell}: source <(berth completion {shell})
_berth() {{
  local cur cmd opts names
  cur="${{COMP_WORDS[COMP_CWORD]}}"
  cmd="${{COMP_WORDS[1]}}"
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W {shlex.quote(' '.join([*COMMANDS, '--help', '--version']))} \
-- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    case "$cmd" in
{cases}
      *) opts="--help" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  case "$cmd" in
    {'|'.join(WITH_KINDS)})
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(' '.join(kinds))} -- "$cur"))
      else
        names=$(berth get "${{COMP_WORDS[2]}}" -o 'jsonpath={{.items[*].metadata.name}}' \
2>/dev/null)
        COMPREPLY=($(compgen -W "$names" -- "$cur"))
      fi
      return ;;
  esac
  COMPREPLY=($(compgen -f -- "$cur"))
}}
complete -F _berth berth
"""
    if shell == "zsh":
        body = "autoload -U +X bashcompinit && bashcompinit\n" + body
    return body


def run(args: argparse.Namespace) -> int:
    print(script(args.shell), end="")
    return 0
