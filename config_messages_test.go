package ontime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontimehq/ontime"
)

// TestConfigMessagesNameTheKey: each kind of bad value in ontime.yaml and
// in ONTIME_* variables gives one line that names the key, in the user's
// terms (no Go type names).
func TestConfigMessagesNameTheKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		yaml string
		env  []string
		want string
	}{
		"duration as a number":  {yaml: "hot: {window: 30}", want: `line 1: hot.window: "30" is not a duration such as 30s`},
		"bad duration":          {yaml: "delivery:\n  timeout: soon\n", want: `line 2: delivery.timeout: "soon" is not a duration such as 30s`},
		"word for a number":     {yaml: "store: {tables: many}", want: `store.tables: "many" is not a whole number`},
		"fraction for a number": {yaml: "delivery: {concurrency: 2.5}", want: `delivery.concurrency: "2.5" is not a whole number`},
		"unknown key":           {yaml: "store:\n  driverr: sqlite\n", want: `line 2: store.driverr: unknown key (did you mean driver?) (known: databases, databases_file, driver, expand_databases, max_connections, segments, tables, zones)`},
		"unknown top key":       {yaml: "lsten: 127.0.0.1:1", want: `lsten: unknown key (did you mean listen?)`},
		"key twice":             {yaml: "listen: a:1\nlisten: b:2\n", want: "listen: given twice"},
		"section not a map":     {yaml: "store: sqlite", want: `store: a section is a map of keys to values, got "sqlite"`},
		"not a map at all":      {yaml: "- a\n- b\n", want: "the config is a map of keys to values, got a list"},
		"scalar for a list":     {yaml: "store: {databases: x.db}", want: `store.databases: want a list, got "x.db"`},
		"list for a scalar":     {yaml: "listen: [a, b]", want: "listen: want a single value, got a list"},
		"map in a list":         {yaml: "hot: {redis_addrs: [{a: 1}]}", want: "hot.redis_addrs[0]: want a single value, got a map"},
		"malformed yaml":        {yaml: "store: {tables: 2", want: "line 1"},
		"env duration":          {env: []string{"ONTIME_HOT_WINDOW=30"}, want: `ONTIME_HOT_WINDOW (hot.window): "30" is not a duration such as 30s`},
		"env number":            {env: []string{"ONTIME_STORE_TABLES=many"}, want: `ONTIME_STORE_TABLES (store.tables): "many" is not a whole number`},
		"env unknown":           {env: []string{"ONTIME_STORE_DRIVR=mongo"}, want: "ONTIME_STORE_DRIVR: unknown variable: no config key is called that (did you mean ONTIME_STORE_DRIVER?)"},
		"env unknown, far":      {env: []string{"ONTIME_COLOUR=blue"}, want: "ONTIME_COLOUR: unknown variable"},
		"value out of range":    {yaml: "hot: {window: 1ms}", want: "hot.window: 1ms is out of range"},
		"pprof beyond loopback": {yaml: "debug: {pprof_listen: '0.0.0.0:6060'}", want: `debug.pprof_listen: "0.0.0.0" is not a loopback address`},
		"pprof not host:port":   {yaml: "debug: {pprof_listen: '6060'}", want: `debug.pprof_listen: "6060" is not host:port`},
		"pprof port":            {env: []string{"ONTIME_DEBUG_PPROF_LISTEN=127.0.0.1:x"}, want: `debug.pprof_listen: port "x" is not a number`},
		"byte budget too small": {yaml: "hot: {max_bytes: 1000}", want: "hot.max_bytes: 1000 is out of range 1048576..1099511627776"},
		"env byte budget":       {env: []string{"ONTIME_HOT_MAX_BYTES=1000"}, want: "hot.max_bytes: 1000 is out of range"},
		"body budget too small": {yaml: "http: {max_batch_bytes: 8388608, max_inflight_body_bytes: 1048576}", want: "http.max_inflight_body_bytes: 1048576 is out of range 8388608..1099511627776 (at least http.max_batch_bytes)"},
		"env body budget":       {env: []string{"ONTIME_HTTP_MAX_INFLIGHT_BODY_BYTES=-1"}, want: "http.max_inflight_body_bytes: -1 is out of range"},
		"env value validated":   {env: []string{"ONTIME_STORE_DRIVER=mongo"}, want: `store.driver: "mongo" is not one of sqlite, mysql, postgres`},
	} {
		path := ""
		if tc.yaml != "" {
			path = filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := ontime.LoadConfig(path, append([]string{"ONTIME_DATA_DIR=" + dir}, tc.env...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
			continue
		}
		for _, goWord := range []string{"[]", "int", "string", "!!", "yaml:", "unmarshal", "ontime."} {
			if strings.Contains(strings.TrimPrefix(err.Error(), "config "+path), goWord) && !strings.Contains(tc.want, goWord) {
				t.Errorf("%s: %q has %q in it", name, err, goWord)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q spans lines", name, err)
		}
	}
}

// TestConfigEnvAndYAMLValues: good values of every kind arrive, env over
// YAML; variables that are not config keys are let through.
func TestConfigEnvAndYAMLValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ontime.yaml")
	yaml := "# comment only above\nlisten: 127.0.0.1:7171\nstore:\n  tables: 1_000\n  databases: [a.db, b.db]\nhot:\n  window: 45s\n  redis_addrs:\nnode_id:\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ontime.LoadConfig(path, []string{"ONTIME_DATA_DIR=" + dir, "ONTIME_DELIVERY_TIMEOUT=3s", "ONTIME_STORE_SEGMENTS=2",
		"ONTIME_SERVER=h:1", "ONTIME_BENCH_ROWS=9", "ONTIME_TEST_PG=x", "ONTIME_SCREENSHOTS=/tmp/shots", "OTHER=1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7171" || c.Store.Tables != 1000 || len(c.Store.Databases) != 2 || time.Duration(c.Hot.Window) != 45*time.Second ||
		time.Duration(c.Delivery.Timeout) != 3*time.Second || c.Store.Segments != 2 || c.NodeID == "" {
		t.Fatalf("config %+v", c)
	}
	for _, empty := range []string{"", "# nothing\n", "{}\n"} {
		if err := os.WriteFile(path, []byte(empty), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ontime.LoadConfig(path, []string{"ONTIME_DATA_DIR=" + dir}); err != nil {
			t.Errorf("config %q: %v", empty, err)
		}
	}
}
