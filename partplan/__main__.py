"""``python -m partplan ...`` = the ``partplan`` console script (also under
``torchrun --nproc-per-node N -m partplan run spmm PLAN``)."""
import sys

from partplan.cli.main import main

sys.exit(main())
