"""``python -m perfkit_core`` runs the ``perfkit`` command line."""

from perfkit_core.cli import console_main

# Dask's local workers are spawned processes that import this module again under another
# name: only the process started as ``python -m perfkit_core`` runs the command line.
if __name__ == "__main__":
    console_main()
