"""``python -m tvm_tma demo [--arch sm_90a]`` / ``python -m tvm_tma explain FILE.py``."""

import sys

from .cli import main

sys.exit(main())
