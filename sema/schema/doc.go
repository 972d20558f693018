// Package schema is the layout of conch's keys in etcd and of the records they hold: the
// names and capacities a key may carry (D4), the keys the recipe writes (Prefix, LeaseKey,
// NodeKey, NodeWaitKey, PauseKey, OnceKey), the one parser that acquisition and every
// listing use to classify a key under a name (ParseKey, D11), and the record decoders
// (DecodeRecord, DecodePause, DecodeMarker), which take hostile input and never fail: a
// field they cannot read is named, not trusted (D6).
//
// It does no I/O and imports no package of conch's: package sema writes these keys, and
// the layers over it (the run, the fleet rules, the listings, the FleetLock server) read
// them with the same functions, so every reader agrees on every key.
package schema
