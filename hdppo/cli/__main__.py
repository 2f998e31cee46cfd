"""`python -m hdppo.cli ARGS`, the same as `hdppo ARGS`."""
import sys

from hdppo.cli.app import main

sys.exit(main())
