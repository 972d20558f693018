// Package fleet holds the rules a fleet puts on its jobs' runs, over sema's recipe: the run's
// rules (RunRules: a slot kept after the run, D13; one successful run per period, D15; an
// absolute end to the wait, ParseDeadline), the period's marker read and written while
// holding (Job.PeriodDone, Job.ClosePeriod), and the administration of a semaphore from
// outside any run: its pause (SetPause, Resume, D16), its period's reset (ResetOnce, D15),
// the release of the slots a node holds after its runs (ReleaseHeld, D14) and the reboot
// slots a lock server takes for a node (TakeHeld, TakeHeldQueued, DropQueued, D19); and the
// child's check that its slot is still held (SlotFromEnv, CheckHeld, D7c), next to the run
// that hands the slot over in the CONCH_* variables (D5).
//
// sema keeps the recipe and the two hooks these rules stand on: the pause gate that its
// ranking reads and its head follows (the pause key written here), and Holder.HoldAfter, the
// lease rebind that keeps a slot after the run (D13). Where a rule needs more of a holder it
// takes it through Holder's exported hooks (UntilDeadline, CleanupTimeout), never sema's
// internals; it decodes keys and records with sema/schema's decoders, so every reader agrees.
//
// It is a package of its own, not part of internal/slotrun, because most of it runs without
// a child: the CLI's administration commands and the FleetLock server (internal/fleetlock)
// use it, and neither may link the child's supervision that slotrun wires in. The run
// (slotrun) applies the rules to a run; this package knows no process, systemd or CLI, never
// logs, and names no exit status: its errors wrap sema's sentinels, which the caller maps.
package fleet
