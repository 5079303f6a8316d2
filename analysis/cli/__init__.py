"""``python -m analysis`` (and the ``readout-geometry`` command): argument parsing and the subcommands."""
