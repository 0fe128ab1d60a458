//go:build !race

package e2e

// raceBuild: see race_test.go. Without -race (make chaos) the processes
// are built without it, so their speed and memory are a release build's.
const raceBuild = false
