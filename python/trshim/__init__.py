"""trshim: where libtrshim.so and tranalyze are, and the trshim command.

    >>> import trshim
    >>> trshim.library_path()      # for LD_PRELOAD
    '/.../site-packages/trshim/libtrshim.so'
    >>> trshim.tranalyze_path()

`python -m trshim ...` is the trshim command (run, env, doctor, lib).
"""
from .cli import VERSION as __version__, library_path, main, tranalyze_path

__all__ = ["__version__", "library_path", "tranalyze_path", "main"]
