//go:build !race

package replicas_test

// raceEnabled: the tests run with the race detector.
const raceEnabled = false
