"""`python -m streamrace ARGS...` is `streamrace ARGS...` (see __init__.py)."""
import sys

from streamrace import main

sys.exit(main())
