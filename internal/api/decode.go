package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"

	"github.com/ontimehq/ontime/apiv1"
)

// taskDecodeError turns encoding/json's error for a task body into one in
// the API's terms: the field, what it must be (never a Go type), and for
// an unknown field the fields there are.
func taskDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest("", "a task is a JSON object, got %s", jsonKind(te.Value))
		}
		return badRequest(te.Field, "must be %s, got %s", typeWords(te.Type), jsonKind(te.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(f, "unknown field; a task has %s", strings.Join(taskFields(), ", "))
	case errors.As(err, &se):
		return badRequest("", "malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	default:
		return badRequest("", "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// typeWords names a Go type the way the API documents values.
func typeWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// jsonKind names encoding/json's description of a value ("number 2.5",
// "string") for people.
func jsonKind(v string) string {
	kind, detail, _ := strings.Cut(v, " ")
	switch kind {
	case "number":
		if detail != "" {
			return "the number " + detail
		}
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return v
}

// taskFields are the JSON fields of a task body, from apiv1.TaskRequest,
// so that a field added there is listed here.
func taskFields() []string {
	t := reflect.TypeOf(apiv1.TaskRequest{})
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
