// Package store defines where llmdiag keeps what it knows: the latest metrics
// and verdict per node, a bounded history per node, and the health-event feed
// that StreamHealth serves. Implementations live in sub-packages: memory (the
// embedded default) and redisstore (shared by replicas). The interface is shaped for both: every
// call takes a context and can fail, values are protobuf messages or plain
// structs that serialise, and feed positions are opaque string tokens.
package store
