// Package rest holds the REST surface of `llmdiag serve` to its OpenAPI
// document: every answer of the reads at their resource URLs, success and
// error alike, validates against openapi/llmdiag.v1.yaml as committed
// (kin-openapi's request and response validators, the bearer scheme
// included, and once more with every object closed to properties the
// document does not name), every operation of the document is answered 2xx by at least
// one request (a path added to the proto without a case here fails), and a
// REST answer is the Connect RPC's answer as protojson, field for field.
//
// The tests run the simulator's seed fleet and serve, in process
// (internal/testing/clitest), with a tokens file (a reader, a router), on
// free loopback ports. They skip under -short: each waits for the fleet's
// first verdicts.
package rest
