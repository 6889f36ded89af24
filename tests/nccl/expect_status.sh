#!/bin/sh
# Runs a command and succeeds only if it exits with the given status.
want=$1; shift
"$@"; got=$?
[ "$got" -eq "$want" ] && exit 0
echo "expected exit status $want, got $got" >&2
exit 1
