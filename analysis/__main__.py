"""Entry point for ``python -m analysis``."""

import sys

from analysis.cli.main import main

sys.exit(main())
