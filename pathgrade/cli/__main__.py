"""`python -m pathgrade.cli`: the command line."""

import sys

from pathgrade.cli.main import main

sys.exit(main())
