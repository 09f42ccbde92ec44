// Command openapi finishes the OpenAPI document protoc-gen-openapi wrote
// (package internal/openapidoc says how): it reads the file named by its
// first argument and writes the finished document to its second. `make
// generate` uses it.
package main

import (
	"fmt"
	"os"

	"github.com/llmdiag/llmdiag/internal/openapidoc"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: openapi GENERATED.yaml OUT.yaml")
		os.Exit(2)
	}
	in, err := os.ReadFile(os.Args[1])
	if err == nil {
		var out []byte
		if out, err = openapidoc.Finish(in); err == nil {
			err = os.WriteFile(os.Args[2], out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
}
