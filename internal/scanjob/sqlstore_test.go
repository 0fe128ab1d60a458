package scanjob_test

import (
	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/store/sqlstore"
)

// The SQL store keeps the jobs' state; it cannot say so itself (storage
// does not import the stages it serves).
var _ scanjob.State = (*sqlstore.Store)(nil)
