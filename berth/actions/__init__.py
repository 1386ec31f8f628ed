"""What an operator reads and does, beneath both the CLI and the console: resources
joined with what the processes say of them (``resources``), a decision explained
(``explain``), an application's ledger for people (``history``), and its rollout's
report and steering (``rollouts``). Neither front end imports the other."""
