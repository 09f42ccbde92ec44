// Package fleet reads and writes the fleet file: the list of nodes llmdiag
// watches, each with its /metrics URL, model, engine and deployment profile
// (parallel strategy, GPU, model size) and free-form labels (team, region, …).
package fleet
