"""``python -m scimech``: the ``scimech`` command (``python -m scimech ocean study --help``)."""

from scimech.cli.commands import script

if __name__ == "__main__":
    script()
