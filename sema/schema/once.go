// One successful run per period (D15): the period's marker's key and record, which the
// layer that reads and writes it (internal/fleet) and every listing share.

package schema

import (
	"strconv"
	"time"
)

// OnceRoot is the prefix of the period markers, outside KeyRoot so no
// ranking read counts one (D15).
const OnceRoot = "/conch/v1/once/"

// OnceKey is the period marker of the semaphore (name, max) (D15).
func OnceKey(name string, max int) string { return OnceRoot + name + "/" + strconv.Itoa(max) }

// OnceRecord is the value of a period marker: the successful run that
// wrote it (D15).
type OnceRecord struct {
	Version int       `json:"v"`
	Node    string    `json:"node"`
	Rev     int64     `json:"rev"` // the run's fencing token
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}
