//go:build !race

package chaos

// raceEnabled: the tests run with the race detector.
const raceEnabled = false
