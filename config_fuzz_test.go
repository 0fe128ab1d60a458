package ontime_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ontimehq/ontime"
)

// configKeys lists every key of the configuration ("store.driver", …).
func configKeys(t reflect.Type, prefix string, out *[]string) {
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		if t.Field(i).Type.Kind() == reflect.Struct {
			configKeys(t.Field(i).Type, prefix+tag+".", out)
			continue
		}
		*out = append(*out, prefix+tag)
	}
}

// FuzzLoadConfig: any ontime.yaml either loads into a configuration that
// validates and survives being written out and loaded again unchanged, or
// is refused with one line that names the key (or, for YAML that does not
// parse, the line, or says so) at fault.
func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []string{
		"",
		"listen: 127.0.0.1:7070\nstore:\n  driver: sqlite\n  tables: 16\n",
		"store:\n  driver: postgres\n  databases: [\"postgres://x@127.0.0.1/db\"]\n  tables: 4\n  segments: 2\n",
		"hot:\n  tier: redis\n  redis_addrs: [127.0.0.1:6379]\n  window: 2s\n  max_fire_lead: 1s\n",
		"cluster:\n  coordinator: database\n  lease_ttl: 2s\ndelivery:\n  lease_ttl: 2s\n  retry_base: 50ms\n",
		"http:\n  max_batch_bytes: 1048576\n  read_timeout: 3s\n  max_connections: 128\n",
		"store:\n  driverr: sqlite\n",
		"hot:\n  window: 1h1x\n",
		"store: [1, 2]\n",
		"delivery:\n  timeout: 30\n",
		"tables: 4\n\t- x",
		"store:\n  tables: 99999999999999999999\n",
		"log_level: debug\nnode_id: \"\\xff\"\n",
	} {
		f.Add([]byte(seed))
	}
	var keys []string
	configKeys(reflect.TypeOf(ontime.Config{}), "", &keys)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "ontime.yaml")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := ontime.LoadConfig(path, nil)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error of more than one line: %q", msg)
			}
			named := strings.Contains(msg, "line ") || strings.Contains(msg, "not valid YAML: ")
			for _, k := range keys {
				named = named || strings.Contains(msg, k+":") || strings.Contains(msg, k+"[")
			}
			if !named {
				t.Fatalf("error names no key and no line: %q", msg)
			}
			return
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("a loaded config does not marshal: %v", err)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := ontime.LoadConfig(path, nil)
		if err != nil {
			t.Fatalf("%s\nwritten back and loaded again: %v", out, err)
		}
		if out2, _ := yaml.Marshal(again); string(out2) != string(out) {
			t.Fatalf("written back and loaded again, it changed:\n%s\n%s", out, out2)
		}
	})
}

// FuzzConfigEnv: any value of any ONTIME_* variable either loads or is
// refused with one line naming the variable or the key.
func FuzzConfigEnv(f *testing.F) {
	var keys []string
	configKeys(reflect.TypeOf(ontime.Config{}), "", &keys)
	for i, v := range []string{"30s", "x", "-1", "1,2,,3", "", "99999999999999999999", "postgres", "\xff"} {
		f.Add(uint(i*7), v)
	}
	f.Fuzz(func(t *testing.T, which uint, val string) {
		key := keys[which%uint(len(keys))]
		name := "ONTIME_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		_, err := ontime.LoadConfig("", []string{name + "=" + val, "ONTIME_DATA_DIR=" + t.TempDir()})
		if err == nil {
			return
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !(strings.Contains(msg, name) || strings.Contains(msg, key)) {
			t.Fatalf("%s=%q: error %q is not one line naming %s or %s", name, val, msg, name, key)
		}
	})
}

// A bad duration names its key (found by FuzzLoadConfig: the message was
// only `"1h1x" is not a duration such as 30s`).
func TestBadDurationNamesItsKey(t *testing.T) {
	dir := t.TempDir()
	for yml, key := range map[string]string{
		"hot:\n  window: 1h1x\n":                        "hot.window: ",
		"delivery:\n  timeout: 30\n":                    "delivery.timeout: ",
		"http:\n  idle_timeout: [1]\n":                  "http.idle_timeout: ",
		"cluster: {lease_ttl: \"2 s\"}\n":               "cluster.lease_ttl: ",
		"delivery:\n  retry_base: 1s\n  retry_max: x\n": "delivery.retry_max: ",
	} {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ontime.LoadConfig(path, nil); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v; want it to name %s", yml, err, key)
		}
	}
}
