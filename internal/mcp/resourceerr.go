package mcp

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// pageError answers a resources/read for a page an output does not have
// with JSON-RPC's invalid-params code (as the MCP spec answers an unknown
// resource), and says in its message that pages count from 0 and how many
// there are, so that a client can correct its next read.
func pageError(uri string, page, pages, size int64) error {
	pages = max(pages, 1) // an empty output still has page 0
	last := "page 0"
	if pages > 1 {
		last = fmt.Sprintf("pages 0 to %d", pages-1)
	}
	return resourceError(jsonrpc.CodeInvalidParams, uri,
		fmt.Sprintf("page %d is past the end: pages are numbered from 0, and this output of %d bytes has %d (%s)", page, size, pages, last),
		map[string]any{"page": page, "pages": pages, "bytes": size})
}

// badPageError answers a page parameter that is not a page number.
func badPageError(uri, p string) error {
	return resourceError(jsonrpc.CodeInvalidParams, uri,
		fmt.Sprintf("page %q is not a page number: pages are numbered from 0 (?page=0 is the first)", p), nil)
}

// resourceError is a JSON-RPC error with a code, for a resource read: a
// plain Go error would reach the client with code 0. data, with the uri
// added, goes in the error's data.
func resourceError(code int64, uri, msg string, data map[string]any) error {
	if data == nil {
		data = map[string]any{}
	}
	data["uri"] = uri
	raw, err := json.Marshal(data)
	if err != nil {
		raw = nil
	}
	return &jsonrpc.Error{Code: code, Message: msg, Data: raw}
}
