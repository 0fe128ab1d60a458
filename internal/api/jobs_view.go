package api

import (
	"github.com/ontimehq/ontime/apiv1"
	"github.com/ontimehq/ontime/internal/scanjob"
	"github.com/ontimehq/ontime/internal/store"
)

// The scan jobs' wire format: the job service answers in its own types,
// and these render them as apiv1 views.

func jobView(in scanjob.Info) apiv1.JobView {
	v := apiv1.JobView{Name: in.Name, Kind: in.Kind, Cron: in.Cron, TimeZone: in.TimeZone, Misfire: in.Misfire,
		Overlap: in.Overlap, Paused: in.Paused, Items: in.Items, NextFire: in.NextFire, Target: in.Target,
		State: in.State, Error: in.Error, BrokenSince: in.BrokenSince}
	if ic := in.Index; ic != nil {
		v.Index = &apiv1.JobIndexView{Table: ic.Table, OK: ic.OK, Index: ic.Index, Warning: ic.Warning, Plan: ic.Plan, DDL: ic.DDL}
	}
	for _, it := range in.ItemStates {
		st := it.State
		v.ItemStates = append(v.ItemStates, apiv1.JobItemView{Item: st.Item, Holder: st.Owner, Owner: it.Owner,
			RunID: st.RunID, Cursor: st.Cursor, LastFire: st.LastFire})
	}
	return v
}

func jobViews(ins []scanjob.Info) []apiv1.JobView {
	out := make([]apiv1.JobView, len(ins))
	for i, in := range ins {
		out[i] = jobView(in)
	}
	return out
}

// jobRunViews is never nil: an empty list is [] on the wire.
func jobRunViews(runs []store.JobRun) []apiv1.JobRun {
	out := make([]apiv1.JobRun, len(runs))
	for i, r := range runs {
		out[i] = apiv1.JobRun{ID: r.ID, Job: r.Job, Item: r.Item, Node: r.Node, Trigger: r.Trigger, FireAt: r.FireAt,
			StartedAt: r.StartedAt, EndedAt: r.EndedAt, Fetched: r.Fetched, Processed: r.Processed, Failed: r.Failed,
			Left: r.Left, Cursor: r.Cursor, Status: r.Status, Error: r.Error}
	}
	return out
}
