"""``python -m perfkit_core`` runs the ``perfkit`` command line."""

from perfkit_core.cli import console_main

console_main()
