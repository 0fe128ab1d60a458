package main

import (
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotCDF draws, for the steady workload, the share of tasks delivered
// within x ms of their due time, per system (x on a log scale).
func plotCDF(path string, rs []result) error {
	p := plot.New()
	p.Title.Text = "Lateness CDF, steady workload"
	p.X.Label.Text = "lateness (ms, log scale)"
	p.Y.Label.Text = "share of tasks delivered"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{}
	var lines []any
	for _, r := range rs {
		if !strings.HasPrefix(r.Workload, "steady") || len(r.Late) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, 200)
		for i := 0; i < 200; i++ {
			idx := i * (len(r.Late) - 1) / 199
			ms := float64(r.Late[idx].Microseconds()) / 1000
			if ms < 0.01 {
				ms = 0.01 // early or instant deliveries sit at the left edge of the log axis
			}
			pts = append(pts, plotter.XY{X: ms, Y: float64(idx+1) / float64(len(r.Late))})
		}
		lines = append(lines, r.System, pts)
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return err
	}
	p.Legend.Top = false
	p.Legend.Left = false
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// plotDrain draws the burst drain rate per system.
func plotDrain(path string, rs []result) error {
	p := plot.New()
	p.Title.Text = "Burst: tasks delivered per second after the due instant"
	p.Y.Label.Text = "tasks/s"
	var vals plotter.Values
	var names []string
	for _, r := range rs {
		if r.Workload == "burst" {
			vals = append(vals, r.DrainPerSec)
			names = append(names, r.System)
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(30))
	if err != nil {
		return err
	}
	p.Add(bars)
	p.NominalX(names...)
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}
