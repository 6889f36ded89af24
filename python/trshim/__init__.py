"""trshim: where libtrshim.so and tranalyze are, and the trshim command.

    >>> import trshim
    >>> trshim.library_path()      # for LD_PRELOAD
    '/.../site-packages/trshim/libtrshim.so'
    >>> trshim.tranalyze_path()

`python -m trshim ...` is the trshim command (run, env, doctor, lib). The modules, by concern:
cli (the command line), run, launchers, env, folders, doctor, elf, bundle, ringfile, unpack,
packed_rows, where (the version and paths meson fills in), messages.
"""
from .where import VERSION as __version__, library_path, tranalyze_path


def main(argv=None):
    """the trshim command with argv (default: sys.argv[1:]); its exit status"""
    from .cli import main as cli_main       # (the command's modules load when it runs, not on import trshim)
    return cli_main(argv)


__all__ = ["__version__", "library_path", "tranalyze_path", "main"]
