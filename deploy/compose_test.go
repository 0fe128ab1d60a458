package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"go.yaml.in/yaml/v3"

	"github.com/ontimehq/ontime"
)

// composeFile is the part of compose.yaml the test checks.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
		DependsOn   any               `yaml:"depends_on"`
	} `yaml:"services"`
	Volumes map[string]any `yaml:"volumes"`
}

// mounts maps each bind mount's path in the container to the file or
// directory here (relative sources; named volumes are left out), and
// fails when a source is missing.
func mounts(t *testing.T, svc string, vols []string, named map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range vols {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("%s: volume %q is not source:target", svc, v)
			continue
		}
		src, dst := parts[0], parts[1]
		if !strings.HasPrefix(src, ".") {
			if _, ok := named[src]; !ok {
				t.Errorf("%s: volume %q is not declared under volumes:", svc, src)
			}
			continue
		}
		if _, err := os.Stat(src); err != nil {
			t.Errorf("%s: mount source %s: %v", svc, src, err)
		}
		out[dst] = src
	}
	return out
}

// TestComposeFile: compose.yaml (the 3-node trial cluster) is sound as far
// as can be told without Docker: every mounted file exists; each ontime
// service runs `serve --config` on a mounted config that the node's own
// loader accepts with the service's ONTIME_* environment (a clustered
// PostgreSQL store, a node ID and advertised address of its own, reachable
// at the port Prometheus scrapes); Prometheus's config loads with
// Prometheus's loader and names the mounted rules and every ontime node;
// Grafana is provisioned with the dashboard and a Prometheus data source.
func TestComposeFile(t *testing.T) {
	c, nodes := checkComposeNodes(t, "compose.yaml", "postgres", "memory")

	prom := c.Services["prometheus"]
	pm := mounts(t, "prometheus", prom.Volumes, c.Volumes)
	pc, err := config.LoadFile(pm["/etc/prometheus/prometheus.yml"], false, nil)
	if err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	for _, f := range pc.RuleFiles {
		if src, ok := pm[f]; !ok || filepath.Clean(src) != "prometheus/ontime-rules.yml" {
			t.Errorf("rule file %s is not deploy/prometheus/ontime-rules.yml mounted (%q)", f, src)
		}
	}
	if len(pc.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rules")
	}
	var targets []string
	for _, sc := range pc.ScrapeConfigs {
		for _, sd := range sc.ServiceDiscoveryConfigs {
			static, ok := sd.(discovery.StaticConfig)
			if !ok {
				continue
			}
			for _, g := range static {
				for _, tg := range g.Targets {
					targets = append(targets, string(tg[model.AddressLabel]))
				}
			}
		}
	}
	for _, n := range nodes {
		if !slices.Contains(targets, n+":7070") {
			t.Errorf("prometheus does not scrape %s:7070 (targets %v)", n, targets)
		}
	}

	graf := c.Services["grafana"]
	gm := mounts(t, "grafana", graf.Volumes, c.Volumes)
	prov, ok := gm["/etc/grafana/provisioning"]
	if !ok {
		t.Fatal("grafana: no provisioning mounted")
	}
	var dash struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov, "dashboards", "ontime.yaml"), &dash)
	if len(dash.Providers) != 1 || filepath.Clean(gm[dash.Providers[0].Options.Path+"/ontime-dashboard.json"]) != "grafana/ontime-dashboard.json" {
		t.Errorf("grafana's dashboard provider %+v does not point at the mounted deploy/grafana/ontime-dashboard.json", dash.Providers)
	}
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov, "datasources", "prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("grafana's data sources %+v, want the compose prometheus", ds.Datasources)
	}
}

// checkComposeNodes checks a compose file's ontime services: every mount
// exists; each runs `serve --config` on a mounted config that the node's
// own loader accepts with the service's ONTIME_* environment (a clustered
// store of driver, the hot tier tier, a node ID and advertised address of
// its own, reachable at port 7070), published on loopback only; and there
// are 3 of them. It returns the file and the ontime services' names.
func checkComposeNodes(t *testing.T, file, driver, tier string) (composeFile, []string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var nodes, ids []string
	for name, s := range c.Services {
		m := mounts(t, name, s.Volumes, c.Volumes)
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("%s: build: %v", name, err)
			}
		}
		if len(s.Command) == 0 || s.Command[0] != "serve" {
			continue
		}
		nodes = append(nodes, name)
		i := slices.Index(s.Command, "--config")
		if i < 0 || i+1 >= len(s.Command) {
			t.Errorf("%s: command %v has no --config", name, s.Command)
			continue
		}
		local, ok := m[s.Command[i+1]]
		if !ok {
			t.Errorf("%s: the config %s is not mounted", name, s.Command[i+1])
			continue
		}
		var env []string
		for k, v := range s.Environment {
			env = append(env, k+"="+v)
		}
		cfg, err := ontime.LoadConfig(local, env)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if cfg.Store.Driver != driver || cfg.Hot.Tier != tier || cfg.Cluster.Coordinator != "database" || cfg.NodeID != name || cfg.Cluster.Advertise != name+":7070" || !strings.HasSuffix(cfg.Listen, ":7070") {
			t.Errorf("%s: %s: store %s, hot tier %s, coordinator %s, node %q, advertise %q, listen %q", file, name, cfg.Store.Driver, cfg.Hot.Tier, cfg.Cluster.Coordinator, cfg.NodeID, cfg.Cluster.Advertise, cfg.Listen)
		}
		if len(s.Ports) != 1 || !strings.HasPrefix(s.Ports[0], "127.0.0.1:") || !strings.HasSuffix(s.Ports[0], ":7070") {
			t.Errorf("%s: ports %v: the API must be published on loopback only (auth.insecure)", name, s.Ports)
		}
		ids = append(ids, cfg.NodeID)
	}
	if len(nodes) != 3 || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != 3 {
		t.Errorf("ontime services %v with node IDs %v, want 3 distinct", nodes, ids)
	}

	return c, nodes
}

// TestComposeMariaDBFile: compose-mariadb.yaml, the 3-node cluster on
// MariaDB with the Redis hot tier: its nodes as in compose.yaml, on a
// mysql store and the redis tier whose hosts are services of the file,
// each node waiting for both to be healthy.
func TestComposeMariaDBFile(t *testing.T) {
	c, nodes := checkComposeNodes(t, "compose-mariadb.yaml", "mysql", "redis")
	for _, dep := range []string{"mariadb", "redis"} {
		s, ok := c.Services[dep]
		if !ok || s.Image == "" {
			t.Errorf("no %s service with an image", dep)
		}
		for _, n := range nodes {
			deps, _ := c.Services[n].DependsOn.(map[string]any)
			cond, _ := deps[dep].(map[string]any)
			if cond["condition"] != "service_healthy" {
				t.Errorf("%s does not wait for %s to be healthy: %v", n, dep, c.Services[n].DependsOn)
			}
		}
	}
	for _, n := range nodes {
		s := c.Services[n]
		m := mounts(t, n, s.Volumes, c.Volumes)
		var env []string
		for k, v := range s.Environment {
			env = append(env, k+"="+v)
		}
		cfg, err := ontime.LoadConfig(m["/etc/ontime/ontime.yaml"], env)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Store.Databases) != 1 || !strings.Contains(cfg.Store.Databases[0], "@tcp(mariadb:3306)/") {
			t.Errorf("%s: databases %v, want the mariadb service", n, cfg.Store.Databases)
		}
		if len(cfg.Hot.RedisAddrs) != 1 || cfg.Hot.RedisAddrs[0] != "redis:6379" {
			t.Errorf("%s: redis_addrs %v, want the redis service", n, cfg.Hot.RedisAddrs)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
