"""``python -m tvm_tma demo [--arch sm_90a]``."""

import sys

from .demo import main

sys.exit(main())
