//go:build race

package e2e

// raceBuild: this test binary runs under the race detector, so the
// `ontime serve` processes it starts are built with it too.
const raceBuild = true
