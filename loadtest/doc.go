// Package loadtest measures the latency of calls against a running service,
// each kind against a floor (the cheapest call the service answers, such as
// its health check) measured in the same rounds.
//
// Run warms up, then makes Rounds rounds. A round measures every kind of
// call at every concurrency, one after the other (kinds inside
// concurrencies), so load that drifts during the run (another process, a
// refresh) falls on every kind alike. Each measurement makes Calls calls
// from as many workers as the concurrency; each call has Timeout. A row of
// the result is the median over rounds of each figure, and the ratio of the
// kind's p50 to the floor's p50 at the same concurrency in the same round,
// its median over rounds.
//
// The run is bounded: by Rounds × concurrencies × kinds × Calls calls, and
// by Duration in all; rounds not finished when Duration passes are left
// out. Any error of a call ends the run with that error, naming the kind
// and concurrency.
package loadtest
