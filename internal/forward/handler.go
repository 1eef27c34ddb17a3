package forward

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
)

// Decider decides a forwarded approval by this tandem's own policy and
// approvers, waiting up to the request's WaitSeconds; from is who
// forwarded it.
type Decider func(ctx context.Context, from Forwarder, r Request) Answer

// maxRequest bounds a forwarded approval.
const maxRequest = 256 << 10

// Forwarder is who a bearer token says forwarded an approval.
type Forwarder struct {
	// Tenant is the one tenant whose actions it may have decided here,
	// such as an approver claim's; "" for the operator token, which
	// answers for every tenant this tandem serves.
	Tenant string
	// Name names it in the log and the audit, e.g. the claim's actor.
	Name string
}

// Authorizer says whether a bearer token may forward approvals here, and
// as whom.
type Authorizer func(ctx context.Context, bearer string) (Forwarder, bool)

// Token authorizes exactly one token (the operator's, for every tenant),
// compared in constant time.
func Token(token string) Authorizer {
	return func(_ context.Context, got string) (Forwarder, bool) {
		ok := token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
		return Forwarder{Name: "operator"}, ok
	}
}

// Either authorizes what any of as authorizes, as the first that does.
func Either(as ...Authorizer) Authorizer {
	return func(ctx context.Context, got string) (Forwarder, bool) {
		for _, a := range as {
			if f, ok := a(ctx, got); ok {
				return f, true
			}
		}
		return Forwarder{}, false
	}
}

// Handler serves POST /api/approvals: a downstream tandem forwards a
// pending approval with a bearer token auth accepts (the operator token,
// or an approver's claim), and gets the answer. A refused or missing
// token gets 401 and decides nothing.
func Handler(auth Authorizer, decide Decider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		var from Forwarder
		if ok && got != "" {
			from, ok = auth(r.Context(), got)
		}
		if !ok || got == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tandem approvals"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"success": false, "error": "unauthenticated",
				"message": "forward approvals with this tandem's operator token as the bearer token"})
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"success": false, "error": "unsupported_media_type",
				"message": "send the approval as JSON, with Content-Type: application/json"})
			return
		}
		var req Request
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest))
		if err := dec.Decode(&req); err != nil || req.Approval.ID == "" || req.Approval.Action.Tool == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "error": "invalid_arguments",
				"message": "the body must be {approval: {id, action: {tool, …}, …}, waitSeconds}"})
			return
		}
		writeJSON(w, http.StatusOK, decide(r.Context(), from, req))
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
