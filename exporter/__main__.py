"""`python -m exporter` is the same as the `gdx` console script."""

import sys

from exporter.cli import main

sys.exit(main())
