"""``python -m lakequery.cli``: the same as the ``lakequery`` console script."""

from lakequery.cli import main

main()
