package ontime

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ontimehq/ontime/internal/cluster"
	"github.com/ontimehq/ontime/internal/scanjob"
)

// JobConfig is one declarative scan job (`jobs:` in ontime.yaml): every
// cron fire time, each item — (database, table, segment) of the users'
// tables — is walked with a keyset cursor on source.key, its rows handed
// to process.target in batches, and on_success.set written for exactly
// the rows processed.
type JobConfig struct {
	Name      string             `yaml:"name"`      // 1–64 of A-Z a-z 0-9 _ . -
	Cron      string             `yaml:"cron"`      // 5 or 6 fields, @every 10s, @hourly …
	TimeZone  string             `yaml:"time_zone"` // IANA; default UTC
	Misfire   string             `yaml:"misfire"`   // skip | fire_once (default)
	Overlap   string             `yaml:"overlap"`   // skip: a trigger while the item runs does nothing
	Source    JobSourceConfig    `yaml:"source"`
	Process   JobProcessConfig   `yaml:"process"`
	OnSuccess JobOnSuccessConfig `yaml:"on_success"`
}

// JobSourceConfig is where a job's rows are.
type JobSourceConfig struct {
	Driver    string   `yaml:"driver"`    // mysql | postgres | sqlite
	Databases []string `yaml:"databases"` // one DSN per database
	// Zones names each database's zone, one per entry of databases
	// (empty: none): the cluster runs a database's items on nodes of its
	// zone (cluster.zone) while any is alive, as with store.zones.
	Zones    []string       `yaml:"zones"`
	Table    string         `yaml:"table"`    // "bill_{table}": {table} = 0 … tables-1
	Tables   int            `yaml:"tables"`   // per database; default 1
	Segments int            `yaml:"segments"` // per table (integer keys: key mod segments); default 1
	Key      string         `yaml:"key"`      // keyset column; index (where columns…, key)
	Columns  []string       `yaml:"columns"`
	Where    map[string]any `yaml:"where"`    // equality filters, values bound as parameters
	Page     int            `yaml:"page"`     // rows per fetch; default 200
	MaxRows  int            `yaml:"max_rows"` // per item per run; 0: until nothing is left
	// RetryColumn and NextColumn isolate failing rows: a failed row's retry count is
	// incremented and its next selection time pushed back (backoff·2^retry),
	// so the next fetches take other rows; after max_attempts it is left.
	RetryColumn string   `yaml:"retry_column"`
	NextColumn  string   `yaml:"next_column"`
	MaxAttempts int      `yaml:"max_attempts"` // default 10
	Backoff     Duration `yaml:"backoff"`      // default 1s
	BackoffMax  Duration `yaml:"backoff_max"`  // default 1h
}

// JobProcessConfig is where rows go.
type JobProcessConfig struct {
	Target      string `yaml:"target"`      // http(s)://… or mq://BROKER/ADDRESS
	Batch       int    `yaml:"batch"`       // rows per call: {"job","item","rows":[…]}; default 50
	Concurrency int    `yaml:"concurrency"` // items one node runs at once; default 8
}

// JobOnSuccessConfig is what is written to a processed row.
type JobOnSuccessConfig struct {
	Set map[string]any `yaml:"set"` // UPDATE … SET col = ? … WHERE key IN (…) AND <where>
}

func (j JobConfig) spec() scanjob.SQLSpec {
	return scanjob.SQLSpec{
		Name: j.Name, Cron: j.Cron, TimeZone: j.TimeZone, Misfire: j.Misfire, Overlap: j.Overlap,
		Driver: j.Source.Driver, Databases: j.Source.Databases, Table: j.Source.Table, Tables: j.Source.Tables,
		Segments: j.Source.Segments, Key: j.Source.Key, Columns: j.Source.Columns, Where: j.Source.Where,
		Page: j.Source.Page, MaxRows: j.Source.MaxRows, RetryColumn: j.Source.RetryColumn, NextColumn: j.Source.NextColumn,
		MaxAttempts: j.Source.MaxAttempts, Backoff: time.Duration(j.Source.Backoff), BackoffMax: time.Duration(j.Source.BackoffMax),
		Target: j.Process.Target, Batch: j.Process.Batch, Concurrency: j.Process.Concurrency, Set: j.OnSuccess.Set,
	}
}

// validateJobs checks every job of the config; errors name jobs[i] and
// the key.
func validateJobs(jobs []JobConfig) error {
	seen := map[string]bool{}
	for i, j := range jobs {
		sp := j.spec()
		if _, err := sp.Normalize(); err != nil {
			return fmt.Errorf("jobs[%d]: %s", i, strings.TrimPrefix(err.Error(), scanjob.ErrInvalid.Error()+": "))
		}
		if len(j.Source.Zones) > 0 && len(j.Source.Zones) != len(j.Source.Databases) {
			return fmt.Errorf("jobs[%d].source.zones: %d zones for %d databases: give one per database", i, len(j.Source.Zones), len(j.Source.Databases))
		}
		for k, z := range j.Source.Zones {
			key := fmt.Sprintf("jobs[%d].source.zones[%d]", i, k)
			if z == "" {
				return fmt.Errorf("%s: empty zone", key)
			}
			if err := cluster.CheckZone(key, z); err != nil {
				return err
			}
		}
		if seen[j.Name] {
			return fmt.Errorf("jobs[%d].name: %q is declared twice", i, j.Name)
		}
		seen[j.Name] = true
	}
	return nil
}

// jobError words a job registration error like a config error.
func jobError(i int, err error) error {
	if errors.Is(err, scanjob.ErrInvalid) {
		return fmt.Errorf("jobs[%d]: %s", i, strings.TrimPrefix(err.Error(), scanjob.ErrInvalid.Error()+": "))
	}
	return fmt.Errorf("jobs[%d]: %w", i, err)
}
