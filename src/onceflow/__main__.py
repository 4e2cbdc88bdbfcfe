import sys

from onceflow.cli.main import main

sys.exit(main())
