package mcp

import "fmt"

// contentTaker is the writer of a stdio connection whose guard hands an
// upload's content beside the SDK (package stdio's Guard.Content): the
// arguments then hold a reference in its place, and the upload takes the
// content back before anything looks at it.
type contentTaker interface {
	Content(ref string) (string, error)
}

// handedContent puts back the content of an upload whose arguments hold
// the stdio guard's reference; other content stays as sent.
func (s *Server) handedContent(info *call, a *uploadArgs) error {
	if a.Content == nil || info.req == nil {
		return nil
	}
	st := s.stashOf(info.req.Session)
	if st == nil || st.content == nil {
		return nil
	}
	c, err := st.content(*a.Content)
	if err != nil {
		return invalidArg("content", "%s", fmt.Sprint(err))
	}
	a.Content = &c
	return nil
}
