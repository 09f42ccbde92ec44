package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/llmdiag/llmdiag/fleet"
	llmdiagv1 "github.com/llmdiag/llmdiag/gen/llmdiag/v1"
)

// Paging of ListNodes: a page holds page_size nodes (DefaultPageSize when
// 0, at most MaxPageSize), sorted by id; next_page_token names the last id
// sent and the filters it was sent under, so the next page starts after that
// id whatever joined or left the fleet meanwhile.
const (
	DefaultPageSize = 1000
	MaxPageSize     = 1000
)

// pageTokenVersion starts every page token, so that a format change is
// recognised instead of misread.
const pageTokenVersion = "n1"

// pageFilter is what a page token binds: a token is valid only with the
// filters of the request that produced it.
func pageFilter(req *llmdiagv1.ListNodesRequest) string {
	return fmt.Sprintf("%s\x00%d\x00%d", req.GetModel(), req.GetEngine(), req.GetStatus())
}

// pageSize validates page_size into the number of nodes to send.
func pageSize(n int32) (int, error) {
	switch {
	case n < 0:
		return 0, invalid("page_size", fmt.Errorf("%d is negative", n))
	case n == 0:
		return DefaultPageSize, nil
	}
	return min(int(n), MaxPageSize), nil
}

// encodePageToken is the token of the page after the one ending at lastID.
func encodePageToken(req *llmdiagv1.ListNodesRequest, lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pageTokenVersion + "\x00" + pageFilter(req) + "\x00" + lastID))
}

// decodePageToken returns the id the requested page starts after ("" for
// the first page).
func decodePageToken(req *llmdiagv1.ListNodesRequest) (string, error) {
	tok := req.GetPageToken()
	if tok == "" {
		return "", nil
	}
	bad := func(why string) error {
		return invalid("page_token", fmt.Errorf("%s: pass back next_page_token unchanged, with the same filters", why))
	}
	if len(tok) > 1024 {
		return "", bad("too long")
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", bad("not a page token")
	}
	version, rest, ok := strings.Cut(string(raw), "\x00")
	if !ok || version != pageTokenVersion {
		return "", bad("not a page token")
	}
	i := strings.LastIndexByte(rest, '\x00')
	if i < 0 {
		return "", bad("not a page token")
	}
	filter, after := rest[:i], rest[i+1:]
	if !fleet.ValidID(after) {
		return "", bad("not a page token")
	}
	if filter != pageFilter(req) {
		return "", invalid("page_token", errors.New("made for other filters (model, engine, status): start again without a token"))
	}
	return after, nil
}
