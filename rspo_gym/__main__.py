"""``python -m rspo_gym ...``: the ``rspo-gym`` command line, in a form launchers can start
(``accelerate launch -m rspo_gym train ...``, ``torchrun -m rspo_gym train ...``)."""

import sys

from rspo_gym.cli import main

if __name__ == "__main__":
    sys.exit(main())
