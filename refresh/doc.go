// Package refresh runs llmdiag's ingest loop: on every tick it asks the source
// for each node's indicators over the default window, diagnoses every node
// against its history and its peers (nodes serving the same model), writes
// the records to the store, and publishes a health event for every node whose
// health changed.
//
// A refresh fails small. The source reports every node it can, each with its
// own errors (see package source); the loop then diagnoses, writes and
// publishes node by node, so a node whose write or publish fails is logged
// and counted (the refresh counts as failed) while the others are stored.
// Only a source that cannot be read at all, or a store that fences this
// writer, ends a refresh without storing anything. Ready closes after the
// first refresh that completed, whatever some of its targets did.
package refresh
