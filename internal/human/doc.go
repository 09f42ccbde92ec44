// Package human formats numbers for people reading a terminal table or a
// chat message: one way everywhere, so that the CLI and the chat bot say
// the same latency the same way.
//
// Seconds reads a latency in seconds at the unit a person would say it in:
// 250µs, 2.5ms, 120ms, 2.50s, 13.3min; no value (NaN) is "-", and an
// unbounded bucket bound is +Inf.
package human
