package topics

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ontimehq/ontime/internal/startstop"
)

// DefaultFoldEvery is Folder's period.
const DefaultFoldEvery = time.Second

// FoldStore folds the deltas the task tables' statement triggers append
// into the per-topic totals (sqlstore.Store.FoldCounts: PostgreSQL; a
// no-op on the engines that keep totals directly).
type FoldStore interface {
	FoldCounts(ctx context.Context) (int64, error)
}

// FolderConfig configures Folder. Store is required.
type FolderConfig struct {
	Store  FoldStore
	Every  time.Duration // DefaultFoldEvery
	Logger *slog.Logger
}

// Folder folds the counts' deltas every second, on every node: a fold
// takes a transaction's advisory lock, so one node folds at a time and
// the others skip that round. Readers sum totals and unfolded deltas, so
// the counts are exact either way; folding keeps that sum a few rows
// long whatever the write rate.
type Folder struct {
	startstop.Base
	cfg FolderConfig
	log *slog.Logger
}

// NewFolder builds the service.
func NewFolder(cfg FolderConfig) (*Folder, error) {
	if cfg.Store == nil {
		return nil, errors.New("topics: Folder needs a Store")
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultFoldEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Folder{cfg: cfg, log: cfg.Logger}, nil
}

// Start runs the folding loop until Stop.
func (f *Folder) Start(ctx context.Context) error {
	return f.Go(ctx, func(ctx context.Context) {
		failing := false
		startstop.Every(ctx, f.cfg.Every, func(ctx context.Context) {
			_, err := f.cfg.Store.FoldCounts(ctx)
			switch {
			case err != nil && ctx.Err() == nil && !failing:
				f.log.Warn("folding the task counts failed; they stay exact, their reads longer", "err", err)
				failing = true
			case err == nil && failing:
				f.log.Info("folding the task counts works again")
				failing = false
			}
		})
	})
}
