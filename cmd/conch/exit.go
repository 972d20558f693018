package main

// The one exit-status table (D3). Nothing below main exits.
const (
	exitOK          = 0
	exitEmpty       = 1   // --who: the semaphore has no holder
	exitUsage       = 64  // EX_USAGE: bad flags or arguments (nothing written to etcd), or etcd refused us
	exitUnavailable = 69  // EX_UNAVAILABLE: etcd unreachable, or a required scope could not be made
	exitSlotLost    = 70  // the slot was lost while the child ran; the child was stopped
	exitConflict    = 75  // EX_TEMPFAIL: no slot within --wait / --nonblock (or -E N)
	exitRuntimeMax  = 124 // the child ran past --runtime-max (timeout(1))
	exitCannotExec  = 126 // the command exists but cannot be executed
	exitNotFound    = 127 // the command is not found
)

const exitTable = `Exit status:
  child's status  the child ran; 128+n if it died of signal n
  75              no slot within --wait, or --nonblock found none (-E N changes it);
                  the child never started and our key is gone
  64              bad flags or arguments (nothing was written to etcd), or etcd
                  refused a request for good (permission denied, bad credentials,
                  a TTL it does not grant): retrying cannot help
  69              etcd unreachable (no answer within --dial-timeout at start, or
                  --wait ran out during an outage), or a scope required by
                  --scope=always, -p or --slice could not be made (e.g. no systemd)
  70              the slot was lost while the child ran (lease lost, key deleted,
                  lease not confirmable); the child was stopped
  124             the child ran past --runtime-max and was stopped
  126 / 127       the command cannot be executed / is not found
  killed by n     conch got SIGTERM, SIGINT or SIGHUP: it stopped the child,
                  released the slot and re-raised the signal
  --who:          0 if any holder, 1 if empty, 69 if etcd is unreachable,
                  64 if it refuses the read, 70 if the listing cannot be
                  written`
