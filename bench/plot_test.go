package main

import (
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// TestCDFLegendHoldsLongNames: the CDF's legend column is as wide as its
// longest system name, so no name is cut at the image's edge.
func TestCDFLegendHoldsLongNames(t *testing.T) {
	long := "ontime service (PostgreSQL, batch 100)"
	legend := plot.NewLegend()
	w := legendWidth(legend, []string{"asynq tuned", long})
	if need := legend.TextStyle.Width(long) + legend.ThumbnailWidth; w <= need {
		t.Fatalf("legend column %v is narrower than %q (%v)", w, long, need)
	}
	if legendWidth(legend, []string{"asynq"}) != legendWidth(legend, nil) {
		t.Fatal("a short name should keep the 2.5 inch column")
	}
	rs := []result{{System: long, Workload: "burst", N: 3, Late: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}}}
	path := filepath.Join(t.TempDir(), "cdf.png")
	if err := plotCDF(path, "burst", rs); err != nil {
		t.Fatal(err)
	}
}
