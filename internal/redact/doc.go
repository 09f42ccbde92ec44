// Package redact hides credentials before text leaves the process: a URL's
// password never reaches an answer, a log line or an error through it.
package redact
