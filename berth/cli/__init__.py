"""The ``berth`` command: one entry point, a subcommand per process or tool."""
