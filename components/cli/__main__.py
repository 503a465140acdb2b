"""``python -m components.cli`` runs the ``kimi-k3`` command."""

import sys

from components.cli import main

sys.exit(main())
