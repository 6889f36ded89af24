"""How every command of trshim speaks: say() for its one-line messages on stderr (prefixed
"trshim:", as the shim's), plural() for counts in them."""
import sys


def say(msg):
    sys.stderr.write("trshim: %s\n" % msg)


def plural(n, word):
    """n and the word, plural unless n is 1: "1 trace", "2 traces"."""
    return "%d %s%s" % (n, word, "" if n == 1 else "s")
