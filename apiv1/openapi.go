package apiv1

import (
	"bytes"
	_ "embed"
)

// openAPI is the OpenAPI 3.1 description of API v1. It is written by hand
// beside the types above; the API tests check the server against it (every
// route, every status, every body), so it cannot drift.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 document of API v1 (JSON), the one
// served at GET /v1/openapi.json.
func OpenAPI() []byte { return bytes.Clone(openAPI) }
