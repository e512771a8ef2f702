"""How the command line is invoked, in every usage line whichever way it was started: a leaf
both ``cli.py`` and ``migrate/`` (its ``migrate`` subcommand) name it by."""

PROG = "python -m pep517_torch"
