"""``python -m healthcheck.cli``: the same as the ``healthcheck`` command."""
from .main import main

main()
