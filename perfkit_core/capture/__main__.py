"""``python -m perfkit_core.capture``: the background conversion helper process
(``perfkit_core.capture.background``), reading jobs from standard input."""

from perfkit_core.capture.background import main

main()
