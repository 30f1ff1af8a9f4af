"""One module per ``speechkit <command>`` (and per subcommand of a command group such as ``speechkit data``).

A command module defines ``add_arguments(parser)`` and ``run(args) -> int | None``; ``speechkit.cli`` imports
it only when that command runs. The layer of this package is above every face it calls (docs/design.md).
"""
