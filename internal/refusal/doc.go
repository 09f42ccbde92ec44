// Package refusal counts what the service refuses and logs it at a pace the
// caller cannot set.
//
// Its promise: every refusal is counted, exactly once, in
// llmdiag_refused_total by its reason (auth, permission, rate, size,
// connections, handshake, streams); and the log gets at most Burst lines at
// once and PerSecond lines a second for each reason, however fast callers
// are refused. When lines of a reason were held back, the next line logged
// for that reason says how many (the "suppressed" attribute): the log is a
// sample, the counter the whole.
//
// Log.ErrorLog is the same for net/http's own error log: its "http: TLS
// handshake error" lines are refusals of reason handshake (except a
// handshake the server broke off by closing the connection itself: what
// closed it counted it), and any other line is logged at warn level under the same bound (not counted).
//
// A nil *Log is valid and does nothing: packages that refuse take one
// optionally.
package refusal
