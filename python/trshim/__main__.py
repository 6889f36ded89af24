"""python -m trshim: the trshim command (trshim.cli)."""
import sys

from .cli import entry

sys.exit(entry())
