"""Entry point for ``python -m analysis``."""

import sys

from analysis.cli.parser import main

sys.exit(main())
