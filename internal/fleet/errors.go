package fleet

import (
	"fmt"

	"github.com/conch-project/conch/internal/etcderr"
	"github.com/conch-project/conch/sema"
	"github.com/conch-project/conch/sema/schema"
)

// validate checks a semaphore's name and capacity (D4), as sema does: errors wrap
// schema.ErrBadName or schema.ErrBadMax.
func validate(name string, max int) error {
	if err := schema.ValidateName(name); err != nil {
		return err
	}
	if max < 1 || max > schema.MaxCapacity {
		return fmt.Errorf("%w %d: must be 1..%d", schema.ErrBadMax, max, schema.MaxCapacity)
	}
	return nil
}

// etcdFailure wraps err, a failed request doing what, as sema.ErrRefused when etcd rejected
// it for good (etcderr.Refused), else sema.ErrUnavailable.
func etcdFailure(what string, err error) error {
	if etcderr.Refused(err) {
		return fmt.Errorf("%w: %s: %w", sema.ErrRefused, what, err)
	}
	return fmt.Errorf("%w: %s: %w", sema.ErrUnavailable, what, err)
}
