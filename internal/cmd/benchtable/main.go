// Command benchtable reads `go test -bench` output on stdin and prints one
// Markdown table of the medians of each benchmark's runs (see package
// internal/benchtable). `make bench` uses it.
package main

import (
	"fmt"
	"os"

	"github.com/llmdiag/llmdiag/internal/benchtable"
)

func main() {
	rows, err := benchtable.Parse(os.Stdin)
	if err == nil {
		err = benchtable.Write(os.Stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}
