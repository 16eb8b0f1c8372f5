"""``python -m scimech.cli``: the ``scimech`` command."""

from scimech.cli.commands import script

if __name__ == "__main__":
    script()
