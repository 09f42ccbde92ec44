// Package memory is the in-process Store: the embedded default, needing no
// set-up. State lives and dies with the process.
package memory
