package memory_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmdiag/llmdiag/store"
	"github.com/llmdiag/llmdiag/store/internal/storetest"
	"github.com/llmdiag/llmdiag/store/memory"
)

func TestConformance(t *testing.T) {
	n := 0
	storetest.Conformance(t, storetest.Harness{
		New: func(t *testing.T, o storetest.Options) store.Store {
			n++
			return memory.New(memory.Options{HistoryLen: o.HistoryLen, FeedLen: o.FeedLen, Now: o.Now}, fmt.Sprint("e", n, "-", time.Now().UnixNano()))
		},
		Ahead: func(tok string) string { return tok[:strings.LastIndexByte(tok, '-')+1] + "99" },
	})
}
