"""berth's controllers: the shared runtime (``runtime``), and the scheduler, the
propagator and the metrics-cache, which never import each other (import-linter's
contracts in pyproject.toml say so)."""
