package ontime

// Decoding ontime.yaml and ONTIME_* variables so that every error names the
// key in the user's terms ("hot.window: "30" is not a duration such as
// 30s"): the YAML is read as a node tree and walked beside the Config
// struct, so the path of each value is known wherever it fails — in any
// section, including ones added later, with no table of section names.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ParseConfig decodes YAML into c, over the values c has; unknown keys and
// values of the wrong kind are errors naming the key.
func ParseConfig(b []byte, c *Config) error {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: the defaults
		}
		return errors.New(yamlSyntaxError(err))
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return decodeNode(doc.Content[0], reflect.ValueOf(c).Elem(), "")
}

var (
	durationType    = reflect.TypeOf(Duration(0))
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

// keyError is a bad value at a config key.
func keyError(path string, n *yaml.Node, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path == "" {
		return fmt.Errorf("line %d: %s", n.Line, msg)
	}
	return fmt.Errorf("line %d: %s: %s", n.Line, path, msg)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decodeNode sets v from n; path is v's key ("hot.window", "store.databases[1]").
func decodeNode(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // "key:" with nothing: keep the default
	}
	// Types with their own YAML form (sections other helpers add may have
	// some) decode themselves; their errors get the path.
	if v.Type() != durationType && reflect.PointerTo(v.Type()).Implements(unmarshalerType) {
		if err := n.Decode(v.Addr().Interface()); err != nil {
			return keyError(path, n, "%s", cleanYAMLError(err))
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return decodeStruct(n, v, path)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeNode(n, v.Elem(), path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return keyError(path, n, "want a list, got %s", describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := decodeNode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Interface:
		// A value of any kind (a scan job's where and set values): YAML's
		// own reading; the section validates what it accepts.
		var x any
		if err := n.Decode(&x); err != nil {
			return keyError(path, n, "%s", cleanYAMLError(err))
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return keyError(path, n, "want a map of names to values, got %s", describe(n))
		}
		if v.Type().Key().Kind() != reflect.String {
			return keyError(path, n, "unsupported map key type %s", v.Type().Key())
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(v.Type(), len(n.Content)/2))
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			e := reflect.New(v.Type().Elem()).Elem()
			if err := decodeNode(n.Content[i+1], e, join(path, k)); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return keyError(path, n, "want a single value, got %s", describe(n))
	}
	if err := setFromString(v, n.Value); err != nil {
		return keyError(path, n, "%s", err)
	}
	return nil
}

func decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		what := "the config"
		if path != "" {
			what = "a section"
		}
		return keyError(path, n, "%s is a map of keys to values, got %s", what, describe(n))
	}
	fields := map[string]reflect.Value{}
	var known []string
	collectKeys(v, fields, &known)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key := kn.Value
		f, ok := fields[key]
		if !ok {
			return keyError(join(path, key), kn, "unknown key%s (known: %s)", suggest(key, known), strings.Join(known, ", "))
		}
		if seen[key] {
			return keyError(join(path, key), kn, "given twice")
		}
		seen[key] = true
		if err := decodeNode(vn, f, join(path, key)); err != nil {
			return err
		}
	}
	return nil
}

// collectKeys maps the yaml keys of a struct to its fields, inline
// structs included.
func collectKeys(v reflect.Value, out map[string]reflect.Value, known *[]string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := strings.Split(sf.Tag.Get("yaml"), ",")
		if tag[0] == "-" {
			continue
		}
		if len(tag) > 1 && tag[1] == "inline" && sf.Type.Kind() == reflect.Struct {
			collectKeys(v.Field(i), out, known)
			continue
		}
		name := tag[0]
		if name == "" {
			name = strings.ToLower(sf.Name) // yaml's own default
		}
		out[name] = v.Field(i)
		*known = append(*known, name)
	}
	sort.Strings(*known)
}

// describe names a node's kind for people.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	default:
		return strconv.Quote(n.Value)
	}
}

// setFromString sets a scalar field from its text, the same way for YAML
// values and ONTIME_* variables. Lists of strings are comma-separated.
func setFromString(f reflect.Value, s string) error {
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 30s", s)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(s)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		f.SetBool(b)
	case f.CanInt():
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		f.SetInt(n)
	case f.CanUint():
		n, err := strconv.ParseUint(strings.ReplaceAll(s, "_", ""), 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not a whole number of 0 or more", s)
		}
		f.SetUint(n)
	case f.CanFloat():
		x, err := strconv.ParseFloat(s, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		f.SetFloat(x)
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.Set(reflect.ValueOf(parts).Convert(f.Type()))
	default:
		return fmt.Errorf("cannot be set from text; use the config file")
	}
	return nil
}

// yamlSyntaxError is a parse error as one line that says what it is:
// yaml.v3 gives no line for some ("found unexpected end of stream",
// "invalid leading UTF-8 octet"). Found by FuzzLoadConfig.
func yamlSyntaxError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if !strings.HasPrefix(msg, "line ") {
		msg = "not valid YAML: " + msg
	}
	return strings.ReplaceAll(msg, "\n", `\n`)
}

// cleanYAMLError drops the library's Go words from a decode error.
func cleanYAMLError(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// suggest returns ` (did you mean "x"?)` for the known name closest to
// name, when one is close.
func suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// envNotConfig are ONTIME_* variables that are not config keys: the CLI's
// server address, token and CA file, the brokers set one by one
// (applyBrokerEnv), and the knobs of the benchmarks, tests and the chaos
// suite, and where the browser tests put their screenshots.
var envNotConfig = []string{"ONTIME_SERVER", "ONTIME_TOKEN", "ONTIME_CA_FILE", "ONTIME_BENCH_", "ONTIME_TEST_", "ONTIME_BROKERS_", "ONTIME_CHAOS", "ONTIME_CHAOS_", "ONTIME_SCREENSHOTS"}

// applyEnv sets fields from ONTIME_<PATH> variables: ONTIME_STORE_DRIVER,
// ONTIME_HOT_REDIS_ADDRS (lists are comma-separated), ONTIME_DELIVERY_TIMEOUT.
// An ONTIME_ variable that names no key stops the start, as an unknown
// YAML key does: a misspelt override must not be ignored in silence.
// Variables the config names itself (a token_env) are not keys.
func applyEnv(c *Config, environ []string) error {
	fields := map[string]envField{}
	collectEnv(reflect.ValueOf(c).Elem(), "ONTIME", "", fields)
	named := map[string]bool{}
	collectEnvRefs(reflect.ValueOf(c).Elem(), named)
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, kv := range environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "ONTIME_") || named[name] {
			continue
		}
		f, known := fields[name]
		if !known {
			if notConfig(name) {
				continue
			}
			return fmt.Errorf("%s: unknown variable: no config key is called that%s", name, suggest(name, names))
		}
		if err := setFromString(f.v, val); err != nil {
			return fmt.Errorf("%s (%s): %w", name, f.key, err)
		}
	}
	return nil
}

func notConfig(name string) bool {
	for _, p := range envNotConfig {
		if name == p || (strings.HasSuffix(p, "_") && strings.HasPrefix(name, p)) {
			return true
		}
	}
	return false
}

type envField struct {
	v   reflect.Value
	key string // hot.window
}

func collectEnv(v reflect.Value, prefix, path string, out map[string]envField) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := strings.Split(sf.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" || !sf.IsExported() {
			continue
		}
		name := prefix + "_" + strings.ToUpper(tag)
		f := v.Field(i)
		if f.Kind() == reflect.Struct && f.Type() != durationType && !reflect.PointerTo(f.Type()).Implements(unmarshalerType) {
			collectEnv(f, name, join(path, tag), out)
			continue
		}
		out[name] = envField{v: f, key: join(path, tag)}
	}
}

// collectEnvRefs finds the variable names the config refers to: string
// values of keys ending in _env.
func collectEnvRefs(v reflect.Value, out map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectEnvRefs(v.Elem(), out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if !t.Field(i).IsExported() {
				continue
			}
			tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if strings.HasSuffix(tag, "_env") && v.Field(i).Kind() == reflect.String {
				out[v.Field(i).String()] = true
				continue
			}
			collectEnvRefs(v.Field(i), out)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			collectEnvRefs(v.Index(i), out)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			collectEnvRefs(v.MapIndex(k), out)
		}
	}
}
