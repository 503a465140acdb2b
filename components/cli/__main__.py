"""``python -m kimi_k3.cli`` runs the ``kimi-k3`` command."""

import sys

from kimi_k3.cli import main

sys.exit(main())
