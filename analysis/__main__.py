"""Entry point for ``python -m analysis``."""

import sys

from analysis.cli import main

sys.exit(main())
