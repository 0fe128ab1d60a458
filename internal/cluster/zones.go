package cluster

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// zoneRE is what a zone name may be: short, for metric labels and keys.
var zoneRE = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// CheckZone validates a zone name (cluster.zone, store.zones[i]); "" is
// no zone. key names the config key in the error.
func CheckZone(key, zone string) error {
	if zone != "" && !zoneRE.MatchString(zone) {
		return fmt.Errorf("%s: %q must be 1 to 32 of a-z, 0-9 and -", key, zone)
	}
	return nil
}

// AssignZones is AssignGroups with zones: an item whose zone (itemZone;
// nil or "": none) has live nodes goes to one of them, balanced among
// that zone's nodes per group; every other item — no zone, or a zone
// with no live node — is balanced per group over all live nodes, so the
// other zones take a dark zone's items, and those items move back (they
// are no longer with a node of their zone) once the zone has a live node
// again. live maps each live node to its zone ("": none). A pure
// function, like Assign.
func AssignZones(items []string, live map[string]string, itemZone func(string) string, prev map[string]string) map[string]string {
	inZone := map[string][]string{}
	for n, z := range live {
		if z != "" {
			inZone[z] = append(inZone[z], n)
		}
	}
	all := slices.Sorted(maps.Keys(live))
	type bucket struct{ group, zone string }
	buckets := map[bucket][]string{}
	for _, it := range items {
		z := ""
		if itemZone != nil {
			z = itemZone(it)
		}
		if len(inZone[z]) == 0 {
			z = ""
		}
		b := bucket{Group(it), z}
		buckets[b] = append(buckets[b], it)
	}
	keys := slices.SortedFunc(maps.Keys(buckets), func(a, b bucket) int {
		if a.group != b.group {
			return strings.Compare(a.group, b.group)
		}
		return strings.Compare(a.zone, b.zone)
	})
	out := make(map[string]string, len(items))
	for _, b := range keys {
		nodes := all
		if b.zone != "" {
			nodes = inZone[b.zone]
		}
		maps.Copy(out, Assign(buckets[b], nodes, prev))
	}
	return out
}

// Zones maps members to their zones, for Rebalance.
func Zones(members map[string]Member) map[string]string {
	out := make(map[string]string, len(members))
	for id, m := range members {
		out[id] = m.Zone
	}
	return out
}
