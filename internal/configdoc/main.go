// Command configdoc writes docs/configuration.md, the reference of every
// config key, from the code itself: the keys and their types from the yaml
// tags of ontime.Config, the defaults from ontime.DefaultConfig, the bounds
// from what Config.Validate answers for a value out of range, and each
// key's text from the comments on its field. TestConfigDocIsCurrent fails
// when the checked-in page differs from what this produces, so the page
// cannot go stale.
//
//	go run ./internal/configdoc            # rewrite docs/configuration.md
//	go run ./internal/configdoc -check     # exit 1 when it is stale
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/ontimehq/ontime"
)

// page is where the reference lives, relative to the module root.
const page = "docs/configuration.md"

func main() {
	check := flag.Bool("check", false, "exit 1 when "+page+" differs from what the code produces, writing nothing")
	flag.Parse()
	if err := run(*check); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run(check bool) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	want, err := generate(root)
	if err != nil {
		return err
	}
	path := filepath.Join(root, page)
	if check {
		have, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(have, want) {
			return fmt.Errorf("%s is stale: run go run ./internal/configdoc", page)
		}
		return nil
	}
	return os.WriteFile(path, want, 0o644)
}

// moduleRoot is the nearest directory above the working one with a go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// key is one row of the reference.
type key struct {
	path    string // hot.window, topics.NAME.rate, jobs[].name
	typ     string
	def     string // "" when the key has no default of its own (inside a list or map entry)
	bounds  string
	env     string
	text    string
	section string
}

var durationType = reflect.TypeOf(ontime.Duration(0))

func generate(root string) ([]byte, error) {
	comments, err := fieldComments(root)
	if err != nil {
		return nil, err
	}
	var keys []key
	walk(reflect.TypeOf(ontime.Config{}), nil, "", "", false, comments, &keys)
	for i := range keys {
		probe(&keys[i])
	}
	return render(keys), nil
}

// walk appends a key per yaml field of t. idx is the field index path from
// Config (nil once inside a list or map entry, where no default applies).
func walk(t reflect.Type, idx []int, prefix, section string, inEntry bool, comments map[string]string, out *[]key) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := strings.Split(sf.Tag.Get("yaml"), ",")
		if tag[0] == "-" {
			continue
		}
		var fidx []int
		if !inEntry {
			fidx = append(append([]int{}, idx...), i)
		}
		if len(tag) > 1 && tag[1] == "inline" {
			walk(sf.Type, fidx, prefix, section, inEntry, comments, out)
			continue
		}
		name := tag[0]
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		path := prefix + name
		sec := section
		if sec == "" {
			sec = name
		}
		k := key{path: path, section: sec, text: comments[t.Name()+"."+sf.Name]}
		ft := sf.Type
		switch {
		case isStruct(ft):
			k.typ = "map"
			*out = append(*out, withDefault(k, fidx, inEntry))
			walk(ft, fidx, path+".", sec, inEntry, comments, out)
			continue
		case ft.Kind() == reflect.Slice && isStruct(ft.Elem()):
			k.typ = "list of maps"
			*out = append(*out, withDefault(k, fidx, inEntry))
			walk(ft.Elem(), nil, path+"[].", sec, true, comments, out)
			continue
		case ft.Kind() == reflect.Map && isStruct(ft.Elem()):
			k.typ = "map of NAME: map"
			*out = append(*out, withDefault(k, fidx, inEntry))
			walk(ft.Elem(), nil, path+".NAME.", sec, true, comments, out)
			continue
		}
		k.typ = typeName(ft)
		*out = append(*out, withDefault(k, fidx, inEntry))
	}
}

// isStruct reports whether t is read as a YAML map of its own fields.
func isStruct(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).IsExported() && t.Field(i).Tag.Get("yaml") != "" {
			return true
		}
	}
	return false
}

func typeName(t reflect.Type) string {
	switch {
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem())
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of NAME: " + typeName(t.Elem())
	case t.Kind() == reflect.Interface:
		return "any"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.String:
		return "string"
	}
	return t.Kind().String()
}

// withDefault fills the default from ontime.DefaultConfig and the
// environment variable that overrides the key, for keys outside entries.
func withDefault(k key, idx []int, inEntry bool) key {
	if inEntry {
		return k
	}
	v := reflect.ValueOf(ontime.DefaultConfig()).FieldByIndex(idx)
	if k.typ != "map" {
		k.def = formatValue(v)
	}
	name := "ONTIME_" + strings.ToUpper(strings.ReplaceAll(k.path, ".", "_"))
	// The loader is the authority on which variables exist: a name it does
	// not know is refused as "unknown variable".
	if _, err := ontime.LoadConfig("", []string{name + "=\x00"}); err == nil || !strings.Contains(err.Error(), "unknown variable") {
		k.env = name
	}
	return k
}

func formatValue(v reflect.Value) string {
	if v.Type() == durationType {
		return formatDuration(time.Duration(v.Int()))
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return `""`
		}
		return v.String()
	case reflect.Slice:
		if v.Len() == 0 {
			return "[]"
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = formatValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		if v.Len() == 0 {
			return "{}"
		}
		return fmt.Sprintf("%d entries", v.Len())
	}
	return fmt.Sprint(v.Interface())
}

// formatDuration writes 1h rather than time's 1h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// probe asks Config.Validate what it accepts for the key: it sets the key to
// a value out of any range (in the default config, and with the database
// coordinator, whose lease is checked only then) and keeps what the error
// naming the key says about the accepted values.
func probe(k *key) {
	if strings.Contains(k.path, "[]") || strings.Contains(k.path, ".NAME.") {
		probeEntry(k)
		return
	}
	if k.def == "" || k.typ == "map" {
		return
	}
	bases := []func(*ontime.Config){
		func(*ontime.Config) {},
		func(c *ontime.Config) { c.Cluster.Coordinator = "database" },
		func(c *ontime.Config) { c.Hot.Tier = "redis"; c.Hot.RedisAddrs = []string{"127.0.0.1:6379"} },
	}
	for _, base := range bases {
		for _, bad := range []any{int64(-1 << 40), int64(1 << 40), "\x01"} {
			c := ontime.DefaultConfig()
			c.Store.Databases = []string{"x.db"}
			base(&c)
			f, ok := fieldAt(&c, k.path)
			if !ok || !set(f, bad) {
				continue
			}
			err := c.Validate()
			if err == nil {
				continue
			}
			if b := boundsFrom(k.path, err.Error()); b != "" {
				k.bounds = b
				return
			}
		}
	}
}

// examples holds one valid entry of each list or map, so that a key inside
// an entry can be probed like any other: the entry is parsed, one of its
// keys set out of range, and the whole config validated.
const examples = `
topics:
  x: {target: "https://example.com/hook"}
destinations:
  "https://example.com": {concurrency: 1}
schedules:
  - {name: s, cron: "@every 1s", task: {topic: t, target: "https://example.com/x"}}
jobs:
  - name: j
    cron: "@every 1s"
    source: {driver: sqlite, databases: [x.db], table: t, key: id, columns: [id], where: {s: 1}}
    process: {target: "https://example.com/x"}
    on_success: {set: {s: 2}}
outboxes:
  - {name: o, driver: sqlite, databases: [x.db], table: outbox}
auth:
  tokens:
    - {name: a, token_env: CONFIGDOC_TOKEN, role: read}
delivery:
  signing:
    - {topics: "x*", secret_env: CONFIGDOC_SECRET}
`

// concrete writes an entry key as the example names it: jobs[].source.page
// → jobs[0].source.page, topics.NAME.rate → topics.x.rate.
func concrete(path string) string {
	path = strings.ReplaceAll(path, "[]", "[0]")
	path = strings.Replace(path, "destinations.NAME.", `destinations."https://example.com".`, 1)
	return strings.ReplaceAll(path, ".NAME.", ".x.")
}

func probeEntry(k *key) {
	for _, bad := range []any{int64(-1 << 40), int64(1 << 40), "\x01"} {
		c := ontime.DefaultConfig()
		if err := ontime.ParseConfig([]byte(examples), &c); err != nil {
			panic(fmt.Sprintf("configdoc: the example entries no longer parse: %v", err))
		}
		c.Store.Databases = []string{"x.db"}
		if err := c.Validate(); err != nil {
			panic(fmt.Sprintf("configdoc: the example entries are no longer valid: %v", err))
		}
		if !mutate(reflect.ValueOf(&c).Elem(), strings.Split(strings.ReplaceAll(strings.ReplaceAll(k.path, "[]", ".[]"), ".NAME.", ".NAME."), "."), bad) {
			continue
		}
		err := c.Validate()
		if err == nil {
			continue
		}
		full := concrete(k.path)
		// The entry's own errors may name the key from the entry down
		// ("jobs[0]: source.page: …").
		_, inner, _ := strings.Cut(strings.Replace(k.path, ".NAME.", "[].", 1), "[].")
		for _, name := range []string{full, inner} {
			if b := boundsIn(name, err.Error()); b != "" {
				k.bounds = b
				return
			}
		}
	}
}

// mutate sets the field at the yaml path parts ("[]": the first element,
// "NAME": the map's only entry) to bad.
func mutate(v reflect.Value, parts []string, bad any) bool {
	if len(parts) == 0 {
		return set(v, bad)
	}
	switch part := parts[0]; {
	case part == "[]":
		if v.Kind() != reflect.Slice || v.Len() == 0 {
			return false
		}
		return mutate(v.Index(0), parts[1:], bad)
	case part == "NAME":
		if v.Kind() != reflect.Map || v.Len() != 1 {
			return false
		}
		iter := v.MapRange()
		iter.Next()
		elem := reflect.New(v.Type().Elem()).Elem()
		elem.Set(iter.Value())
		if !mutate(elem, parts[1:], bad) {
			return false
		}
		v.SetMapIndex(iter.Key(), elem)
		return true
	default:
		if v.Kind() != reflect.Struct {
			return false
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			if strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0] == part {
				return mutate(v.Field(i), parts[1:], bad)
			}
		}
		return false
	}
}

// boundsIn is boundsFrom for a key named anywhere in the message, after
// its start or a ": ".
func boundsIn(name, msg string) string {
	if b := boundsFrom(name, msg); b != "" {
		return b
	}
	if i := strings.Index(msg, ": "+name+": "); i >= 0 {
		return boundsFrom(name, msg[i+2:])
	}
	return ""
}

func fieldAt(c *ontime.Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, part := range strings.Split(path, ".") {
		found := false
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if name == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
	}
	return v, true
}

func set(f reflect.Value, bad any) bool {
	if f.Kind() == reflect.Pointer {
		p := reflect.New(f.Type().Elem())
		if !set(p.Elem(), bad) {
			return false
		}
		f.Set(p)
		return true
	}
	switch b := bad.(type) {
	case int64:
		switch f.Kind() {
		case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
			if f.OverflowInt(b) {
				b = -1
			}
			f.SetInt(b)
			return true
		case reflect.Float64:
			f.SetFloat(float64(b))
			return true
		}
	case string:
		if f.Kind() == reflect.String {
			f.SetString(b)
			return true
		}
	}
	return false
}

// boundsFrom reads "KEY: VALUE is out of range 1..100" (or "is not one
// of …", "must be …") and returns the part after the value.
func boundsFrom(path, msg string) string {
	rest, ok := strings.CutPrefix(msg, path+": ")
	if !ok {
		return ""
	}
	for _, verb := range []string{"; want ", "; allowed are ", " is out of range ", " is not one of ", " must be ", " is not "} {
		if _, after, ok := strings.Cut(rest, verb); ok {
			switch verb {
			case " is out of range ", "; want ":
				return after
			case "; allowed are ":
				return "characters " + after
			case " is not one of ":
				return "one of " + after
			case " must be ":
				return after
			default:
				return "must be " + after
			}
		}
	}
	return ""
}

// fieldComments maps "Type.Field" to the doc and line comments of the
// field in the root package's source.
func fieldComments(root string) (map[string]string, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				var parts []string
				for _, cg := range []*ast.CommentGroup{fld.Doc, fld.Comment} {
					if t := strings.TrimSpace(cg.Text()); t != "" {
						parts = append(parts, strings.Join(strings.Fields(t), " "))
					}
				}
				for _, id := range fld.Names {
					out[ts.Name.Name+"."+id.Name] = yamlName(fld, id.Name, strings.Join(parts, " "))
				}
			}
			return true
		})
	}
	return out, nil
}

// yamlName writes the Go field name a comment starts with as the key a
// user writes ("MaxEntries bounds …" → "`max_entries` bounds …").
func yamlName(fld *ast.Field, goName, text string) string {
	rest, ok := strings.CutPrefix(text, goName)
	if !ok || fld.Tag == nil || (rest != "" && rest[0] != ' ' && rest[0] != ',') {
		return text
	}
	tag := reflect.StructTag(strings.Trim(fld.Tag.Value, "`"))
	name := strings.Split(tag.Get("yaml"), ",")[0]
	if name == "" || name == "-" {
		return text
	}
	return "`" + name + "`" + rest
}

var longDuration = regexp.MustCompile(`\b(\d+h)0m0s\b|\b(\d+m)0s\b`)

func render(keys []key) []byte {
	var b bytes.Buffer
	b.WriteString(`# Configuration reference

<!-- Generated by ` + "`go run ./internal/configdoc`" + ` from the code: the keys from
ontime.Config's yaml tags, defaults from ontime.DefaultConfig, bounds from
what Config.Validate refuses, text from the fields' comments. Do not edit:
TestConfigDocIsCurrent fails when this file differs from the generator's. -->

` + "`ontime serve --config ontime.yaml`" + ` reads these keys; every key outside a list
or map entry can also be set by the environment variable shown
(` + "`ONTIME_STORE_DRIVER=postgres`" + `; lists comma-separated:
` + "`ONTIME_STORE_DATABASES=dsn1,dsn2`" + `). Unknown keys, unknown ` + "`ONTIME_*`" + `
variables and bad values stop the start with one line naming the key.
` + "`ontime serve --config FILE --check`" + ` validates a file and exits. Durations are
written like ` + "`30s`, `10m`, `1h`" + `. A commented example of every section:
` + "[packaging/ontime.yaml](../packaging/ontime.yaml)" + `.

"Bounds" is what the node refuses outside of; a blank means the value is
checked in context (see the page of the feature) or not at all. Keys
written ` + "`NAME`" + ` or ` + "`[]`" + ` are inside a map or list entry and have no
default of their own.

`)
	var sections []string
	bySection := map[string][]key{}
	for _, k := range keys {
		if _, ok := bySection[k.section]; !ok {
			sections = append(sections, k.section)
		}
		bySection[k.section] = append(bySection[k.section], k)
	}
	// Top-level scalars first, under one heading, then a section per map.
	var top []key
	var rest []string
	for _, s := range sections {
		ks := bySection[s]
		if len(ks) == 1 && ks[0].typ != "map" && !strings.Contains(ks[0].typ, "map") {
			top = append(top, ks[0])
			continue
		}
		rest = append(rest, s)
	}
	if len(top) > 0 {
		b.WriteString("## Node\n\n")
		table(&b, top)
	}
	for _, s := range rest {
		fmt.Fprintf(&b, "## %s\n\n", s)
		table(&b, bySection[s])
	}
	return b.Bytes()
}

func table(b *bytes.Buffer, ks []key) {
	b.WriteString("| key | type | default | bounds | environment | meaning |\n|---|---|---|---|---|---|\n")
	for _, k := range ks {
		bounds := longDuration.ReplaceAllString(k.bounds, "$1$2")
		fmt.Fprintf(b, "| `%s` | %s | %s | %s | %s | %s |\n", k.path, k.typ, code(k.def), cell(bounds), code(k.env), cell(k.text))
	}
	b.WriteString("\n")
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
