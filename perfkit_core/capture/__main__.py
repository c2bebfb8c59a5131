"""``python -m perfkit_core.capture``: the background conversion helper process
(``perfkit_core.capture.helper``), reading jobs from standard input."""

from perfkit_core.capture.helper import main

main()
