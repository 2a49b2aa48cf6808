"""The whole suite's settings.

The suite starts several hundred Python interpreters (every stack's processes, every CLI
call, the frameworks' apps). With `PYTHONDONTWRITEBYTECODE` set in the environment (as on
some CI machines) each of them would compile pathgrade's sources again, about a quarter
of a second of CPU per interpreter; the suite writes bytecode caches (`__pycache__/`,
ignored by git) whatever that variable says, for itself and every process it starts.
"""

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
