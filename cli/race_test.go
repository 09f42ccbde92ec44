//go:build race

package cli

// raceEnabled: the tests run with the race detector.
const raceEnabled = true
