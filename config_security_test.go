package ontime_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ontimehq/ontime"
)

func TestSecurityConfigKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dsns := write("dsns", "# the task databases\npostgres://app:pw-one@db1/x\n\npostgres://app:pw-two@db2/x\n")
	key := write("key", "k-0123456789")
	cfgFile := write("ok.yaml", `
store: {driver: postgres, databases_file: `+dsns+`}
delivery:
  webhook_secret_file: `+key+`
  webhook_previous_secret_file: `+key+`
  signing:
    - {topics: "orders.*", secret_env: ORDERS_KEY}
    - {destination: "https://billing.example", secret_file: `+key+`, previous_secret_env: ORDERS_KEY}
  deny_targets: [10.0.0.0/8, "*.corp.example"]
  allow_targets: ["203.0.113.0/24"]
  echo_error_targets: ["*.partner.example"]
hot: {tier: redis, redis_addrs: ["rediss://u:p@redis.example:6380/2", "127.0.0.1:6379"]}
`)
	c, err := ontime.LoadConfig(cfgFile, []string{"ORDERS_KEY=orders-key-1"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Store.Databases, " ") != "postgres://app:pw-one@db1/x postgres://app:pw-two@db2/x" {
		t.Fatalf("databases_file: %v", c.Store.Databases)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"delivery: {signing: [{secret_file: " + key + "}]}", "delivery.signing[0]: give topics or destination"},
		{"delivery: {signing: [{topics: a}]}", "delivery.signing[0]: no secret"},
		{"delivery: {signing: [{destination: \"https://x/path\", secret_file: " + key + "}]}", "delivery.signing[0].destination"},
		{"delivery: {signing: [{topics: a, secret_env: ONTIME_TEST_NOPE}]}", "ONTIME_TEST_NOPE is not set"},
		{"delivery: {webhook_secret: x, webhook_secret_file: " + key + "}", "not both"},
		{"delivery: {webhook_previous_secret_file: " + key + "}", "beside a current secret"},
		{"delivery: {deny_targets: [10.0.0.0/40]}", "delivery.deny_targets[0]"},
		{"delivery: {allow_targets: [\"http://x\"]}", "delivery.allow_targets[0]"},
		{"delivery: {echo_error_targets: [\"\"]}", "delivery.echo_error_targets[0]"},
		{"hot: {tier: redis, redis_addrs: [\"redis://u:hunter22@\"]}", "hot.redis_addrs[0]"},
		{"hot: {tier: redis, redis_addrs: [\"h:1\"], redis_password_file: /nonexistent/pw}", "hot.redis_password_file"},
		{"store: {databases_file: /nonexistent/dsns}", "store.databases_file"},
		{"cluster: {etcd_password: a, etcd_password_file: " + key + "}", "not both"},
	} {
		f := write("bad.yaml", tc.yaml)
		_, err := ontime.LoadConfig(f, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.yaml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter22") {
			t.Errorf("the error shows a password: %v", err)
		}
	}
}
