"""``python -m streamcrawl.topology.cli``: the ``streamcrawl`` command."""

import sys

from streamcrawl.topology.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
