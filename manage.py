#!/usr/bin/env python
"""Django's command-line utility, with platform/ on the import path (see DESIGN.md)."""

import os
import sys
from pathlib import Path


def main() -> None:
    # platform/ is a plain folder, not a package: adding it to the path makes
    # `capeval` importable without shadowing the standard-library `platform`.
    sys.path.insert(0, str(Path(__file__).resolve().parent / "platform"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "capeval.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
