#!/bin/sh
# journal-child.sh DIR TAG LATE: the command conch runs in the tests/vm journal tests.
# Every line it and its grandchild print starts with TAG. It records its own stdout and
# conch's (its guardian's parent) in DIR, prints to stdout and stderr (one stderr line with
# a "<3>" level prefix), starts a grandchild that prints after LATE seconds (past journald's
# refresh of what it knows about a writer), prints again after LATE seconds itself, and waits
# for the grandchild.
d=$1 tag=$2 late=$3
conch=$(ps -o ppid= -p "$PPID" | tr -d ' ')
own=$(readlink "/proc/$$/fd/1") # $$ is this shell, whose stdout is not the substitution's
echo "$own" > "$d/child-fd1"
readlink "/proc/$conch/fd/1" > "$d/conch-fd1"
echo "$tag out-first"
echo "$tag err-first" >&2
echo "<3>$tag err-level3" >&2
(sleep "$late"; echo "$tag grandchild-late") &
echo running > "$d/running"
sleep "$late"
echo "$tag child-late"
wait
