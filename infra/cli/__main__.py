import sys

from longstep_kit.cli import main

sys.exit(main())
