// Package refresh runs llmdiag's ingest loop: on every tick it asks the source
// for each node's indicators over the default window, diagnoses every node
// against its history and its peers (nodes serving the same model), writes
// the records to the store, and publishes a health event for every node whose
// health changed.
package refresh
