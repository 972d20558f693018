#!/bin/sh
# child.sh DIR [ignore]: the command conch runs in the tests/vm scope tests.
# Its first statement reads its own cgroup (shell builtins only: no other process is
# involved), keeping the unified hierarchy's "0::" line.
# It starts a double-forked grandchild (reparented to conch's guardian), writes what the tests
# read into DIR, and runs until DIR/stop exists. With "ignore" it and the grandchild ignore
# SIGTERM, so only SIGKILL ends them. A SIGINT is recorded in DIR/signal.
while IFS= read -r l; do case $l in 0::*) cg=$l ;; esac; done < /proc/self/cgroup
d=$1
[ "$2" = ignore ] && trap '' TERM
trap 'echo INT > "$d/signal"; exit 130' INT
(sleep 1000 & echo $! > "$d/gc.tmp" && mv "$d/gc.tmp" "$d/gc") &
echo "$cg" > "$d/cgroup"
echo "$CONCH_REV" > "$d/rev"
echo $$ > "$d/pid.tmp" && mv "$d/pid.tmp" "$d/pid"
while [ ! -e "$d/stop" ]; do sleep 0.2; done
exit 0
