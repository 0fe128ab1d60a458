package main

import (
	"image/color"
	"os"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette gives each system its colour, the same in every plot (Tableau 10
// and six darker ones).
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255},
	// and darker shades, for runs of more than ten systems
	{0, 63, 92, 255}, {160, 60, 0, 255}, {20, 90, 20, 255}, {120, 20, 20, 255}, {80, 50, 120, 255}, {90, 90, 0, 255},
}

func colorOf(system string, rs []result) color.Color {
	var names []string
	for _, r := range rs {
		if !slices.Contains(names, r.System) {
			names = append(names, r.System)
		}
	}
	return palette[slices.Index(names, system)%len(palette)]
}

// plotCDF draws, for one workload, the share of tasks delivered within x ms
// of their due time, per system (x on a log scale). ontime's lines are
// solid, the others dashed.
func plotCDF(path, workload string, rs []result) error {
	p := plot.New()
	p.Title.Text = "Lateness CDF, " + workload + " (early deliveries drawn at 0.01 ms)"
	p.X.Label.Text = "lateness (ms, log scale)"
	p.Y.Label.Text = "share of tasks delivered"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	for i := range rs {
		r := &rs[i]
		if r.Workload != workload || len(r.Late) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, 400)
		for i := 0; i < 400; i++ {
			idx := i * (len(r.Late) - 1) / 399
			ms := float64(r.Late[idx].Microseconds()) / 1000
			if ms < 0.01 {
				ms = 0.01 // early or instant deliveries sit at the left edge of the log axis
			}
			// The share counts delivered tasks against all tasks, so a
			// system that lost tasks stays below 1.
			pts = append(pts, plotter.XY{X: ms, Y: float64(idx+1) / float64(r.N)})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = colorOf(r.System, rs)
		l.Width = vg.Points(1.5)
		if !isOntime(r) {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		legend.Add(r.System, l)
	}
	p.Y.Max = 1.02
	legendW := legendWidth(legend, names(rs, workload))
	return saveWithLegend(p, legend, 7.5*vg.Inch+legendW, 5.5*vg.Inch, legendW, path)
}

// names lists the systems that ran workload, in the order of rs.
func names(rs []result, workload string) []string {
	var out []string
	for i := range rs {
		if rs[i].Workload == workload && len(rs[i].Late) > 0 {
			out = append(out, rs[i].System)
		}
	}
	return out
}

// legendWidth is the width of a legend column that holds the longest of
// labels whole (a fixed column cut "ontime service (PostgreSQL, batch
// 100)" short), and at least 2.5 inches.
func legendWidth(legend plot.Legend, labels []string) vg.Length {
	w := 2.5 * vg.Inch
	for _, l := range labels {
		need := legend.ThumbnailWidth + legend.Padding + legend.TextStyle.Width(l) + vg.Points(16)
		w = max(w, need)
	}
	return w
}

// saveWithLegend writes p as a PNG with legend in a column of its own on
// the right, so that it hides no line.
func saveWithLegend(p *plot.Plot, legend plot.Legend, w, h, legendW vg.Length, path string) error {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	legend.Draw(draw.Crop(dc, w-legendW+vg.Points(8), 0, 0, -p.Title.TextStyle.Height(p.Title.Text)-vg.Points(12)))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotDrain draws the burst drain rate per system, one horizontal bar each.
func plotDrain(path string, rs []result) error {
	p := plot.New()
	p.Title.Text = "Burst: tasks delivered per second from the due instant to the last delivery"
	p.X.Label.Text = "tasks/s"
	p.Add(plotter.NewGrid())
	var names []string
	var burst []result
	for _, r := range rs {
		if r.Workload == "burst" {
			burst = append(burst, r)
		}
	}
	// One bar chart per system, so each keeps its colour; bars are placed
	// top to bottom in run order.
	for i, r := range burst {
		vals := make(plotter.Values, len(burst))
		vals[len(burst)-1-i] = r.DrainPerSec
		bars, err := plotter.NewBarChart(vals, vg.Points(18))
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = colorOf(r.System, rs)
		bars.LineStyle.Width = 0
		p.Add(bars)
	}
	for i := len(burst) - 1; i >= 0; i-- {
		names = append(names, burst[i].System)
	}
	p.NominalY(names...)
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}

// plotAccepted draws, for each steady run, the submits accepted per second
// as a share of the rate asked for: one bar per (workload, system), so a
// front door that cannot keep up shows at a glance.
func plotAccepted(path string, rs []result) error {
	p := plot.New()
	p.Title.Text = "Steady runs: submits accepted per second, % of the rate asked for"
	p.X.Label.Text = "accepted / asked (%)"
	p.Add(plotter.NewGrid())
	var steady []result
	for _, r := range rs {
		if r.AskedPerSec > 0 && !r.Skipped {
			steady = append(steady, r)
		}
	}
	if len(steady) == 0 {
		return nil
	}
	var names []string
	for i, r := range steady {
		vals := make(plotter.Values, len(steady))
		vals[len(steady)-1-i] = 100 * r.AcceptedPerSec / r.AskedPerSec
		bars, err := plotter.NewBarChart(vals, vg.Points(10))
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color = colorOf(r.System, rs)
		bars.LineStyle.Width = 0
		p.Add(bars)
	}
	for i := len(steady) - 1; i >= 0; i-- {
		names = append(names, steady[i].Workload+": "+steady[i].System)
	}
	p.NominalY(names...)
	p.X.Min, p.X.Max = 0, 110
	return p.Save(10*vg.Inch, vg.Length(1.5+0.22*float64(len(steady)))*vg.Inch, path)
}
