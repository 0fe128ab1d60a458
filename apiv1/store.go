package apiv1

import "time"

// StoreStatus is GET /v1/store: the store's databases and the expansion
// under way, if any (`ontime store expand`).
type StoreStatus struct {
	// Databases is how many databases the store records (M).
	Databases int `json:"databases"`
	// Tables is the task tables per database (N).
	Tables int `json:"tables"`
	// Epoch is the topology epoch: it moves on with every change of the
	// recorded list of databases.
	Epoch int64 `json:"epoch"`
	// Expansion is the expansion under way; null when there is none.
	Expansion *StoreExpansion `json:"expansion"`
}

// StoreExpansion is an expansion's stored progress.
type StoreExpansion struct {
	// Phase is copy (rows copied to the new databases while the nodes
	// serve) or cleanup (cut over; the copies left behind being deleted).
	Phase string    `json:"phase"`
	From  int       `json:"from"`
	To    int       `json:"to"`
	Since time.Time `json:"since"`
	// Tables is the old databases' tables (From × N); TablesCopied and
	// TablesCleaned how many finished their first copy pass and their
	// cleanup.
	Tables        int   `json:"tables"`
	TablesCopied  int   `json:"tables_copied"`
	TablesCleaned int   `json:"tables_cleaned"`
	RowsCopied    int64 `json:"rows_copied"`
	RowsDeleted   int64 `json:"rows_deleted"`
}

// StoreExpandRequest is the body of POST /v1/store:expand: an expansion
// run by the node (`ontime store expand` run from the console).
type StoreExpandRequest struct {
	// Databases are the new, empty databases, as many as the store has
	// (the first becomes the twin of store.databases[0], and so on).
	// Empty: resume the expansion under way.
	Databases []string `json:"databases,omitempty"`
	// Cutover: after the copy, switch the store to its 2M databases
	// online (the nodes pause for it) and clean up; without it the copy
	// runs and the expansion waits in phase copy.
	Cutover bool `json:"cutover,omitempty"`
	// Nice (0–100) makes the copy and the cleanup sleep after each page
	// that many times the page's own duration, leaving the databases to
	// the live load (1: about half their time). 0: no sleep.
	Nice float64 `json:"nice,omitempty"`
	// Rate caps the rows copied or deleted per second (0: no cap).
	Rate int `json:"rate,omitempty"`
}
