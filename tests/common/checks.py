"""Assertions shared by the Python test drivers: a failed check raises
Failure with a message naming what differed; the driver reports it."""
import os


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def eq(got, want, what):
    if got != want:
        raise Failure("%s: got %r, expected %r" % (what, got, want))


def path_of(name):
    """The path meson passes in environment variable name."""
    v = os.environ.get(name)
    if not v:
        raise Failure("%s is not set (run through meson test)" % name)
    return v
