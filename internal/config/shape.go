package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// checkShape compares the YAML tree with the Config type before it is
// decoded, so that a mistake is reported in tandem's terms (the key path as
// the README writes it, the line, what was expected) rather than in the
// decoder's (Go type and field names). Every mistake is reported, not only
// the first; an unknown key comes with the nearest known one.
//
// Each mistake is also cut out of the tree (a key dropped, a list item
// emptied), so that the rest can still be decoded and validated in the
// same run: pruned lists the key paths cut out, and the keys an unknown
// key most likely meant, whose validation errors would only repeat it.
// ok is false when nothing can be decoded (the file is not a block of keys).
func checkShape(root *yaml.Node) (errs []error, pruned []string, ok bool) {
	if root == nil || root.Kind == 0 {
		return nil, nil, true
	}
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil, true
		}
		root = root.Content[0]
	}
	s := shaper{}
	ok = s.shape(root, reflect.TypeOf(Config{}), "")
	return s.errs, s.pruned, ok
}

// shaper gathers the mistakes of one tree and the paths cut out for them.
type shaper struct {
	errs   []error
	pruned []string
}

// shape checks node against t; path is the key path so far ("" at the top).
// It reports false when n itself is wrong, for the caller to cut it out;
// mistakes further down are cut out where they are.
func (s *shaper) shape(n *yaml.Node, t reflect.Type, path string) bool {
	ok := true
	bad := func(format string, a ...any) {
		where := path
		if where == "" {
			where = "the file"
		}
		s.errs = append(s.errs, fmt.Errorf("line %d: %s: %s", n.Line, where, fmt.Sprintf(format, a...)))
		ok = false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias != nil {
			return s.shape(n.Alias, t, path)
		}
		return true
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return true // an empty value leaves the default
	}
	switch {
	case t == reflect.TypeFor[Network]() && n.Kind == yaml.ScalarNode:
		// network: true or false; a block of keys is checked below.
		if n.Tag != "!!bool" {
			bad("%s is not true or false", quoted(n))
		}
	case t == reflect.TypeFor[AllowEntry]() && n.Kind == yaml.ScalarNode:
		// "host[:port]"; a block {host, methods, paths} is checked below.
	case t == reflect.TypeFor[Ask]():
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!bool" && n.Value != "forward") {
			bad("%s is not true, false or forward", quoted(n))
		}
	case t == reflect.TypeFor[Duration]():
		if n.Kind != yaml.ScalarNode {
			bad("must be a duration like 30s, 15m or 12h")
		} else if _, err := time.ParseDuration(n.Value); err != nil {
			bad("%q is not a duration like 30s, 15m or 12h", n.Value)
		}
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad("must be a block of keys (%s), not %s", keyList(t), what(n))
			return false
		}
		fields := yamlFields(t)
		seen := map[string]int{}
		kept := n.Content[:0:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				if s.shape(v, t, path) {
					kept = append(kept, k, v)
				}
				continue
			}
			sub := join(path, k.Value)
			f, known := fields[k.Value]
			if !known {
				msg := fmt.Sprintf("line %d: %s: unknown key", k.Line, sub)
				if near := nearest(k.Value, t); near != "" {
					msg += fmt.Sprintf("; did you mean %s?", near)
					s.pruned = append(s.pruned, join(path, near))
				} else {
					msg += fmt.Sprintf(" (known here: %s)", keyList(t))
				}
				s.errs = append(s.errs, errors.New(msg))
				s.pruned = append(s.pruned, sub)
				continue
			}
			if line, dup := seen[k.Value]; dup {
				s.errs = append(s.errs, fmt.Errorf("line %d: %s: set twice (first on line %d)", k.Line, sub, line))
				s.pruned = append(s.pruned, sub)
				continue
			}
			seen[k.Value] = k.Line
			if !s.shape(v, f.Type, sub) {
				s.pruned = append(s.pruned, sub)
				continue
			}
			kept = append(kept, k, v)
		}
		n.Content = kept
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad("must be a list (one \"- item\" per line, or [a, b]), not %s", what(n))
			return false
		}
		for i, c := range n.Content {
			// A wrong item is emptied, not removed, so that the items
			// after it keep their numbers in later messages.
			if sub := fmt.Sprintf("%s[%d]", path, i); !s.shape(c, t.Elem(), sub) {
				n.Content[i] = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: c.Line, Column: c.Column}
				s.pruned = append(s.pruned, sub)
			}
		}
	case t.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			bad("%s is not true or false", quoted(n))
		}
	case t.Kind() == reflect.Int:
		if n.Kind != yaml.ScalarNode {
			bad("must be a whole number, not %s", what(n))
		} else if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err != nil || n.Tag != "!!int" {
			bad("%q is not a whole number", n.Value)
		}
	case t.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			bad("must be a single value, not %s", what(n))
		}
	}
	return ok
}

// what names a node's kind the way the README talks about YAML.
func what(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a block of keys"
	case yaml.SequenceNode:
		return "a list"
	default:
		return fmt.Sprintf("the value %q", n.Value)
	}
}

func quoted(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return what(n)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps each YAML key of struct t to its field.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		m[name] = f
	}
	return m
}

// keyList lists struct t's keys in declaration order.
func keyList(t reflect.Type) string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return strings.Join(keys, ", ")
}

// nearest returns the key of t that key most likely misspells: the same
// key in another case, or one at most a third of its length away in
// edits; "" when none is close.
func nearest(key string, t reflect.Type) string {
	best, bestD := "", len(key)/3+1
	for name := range yamlFields(t) {
		if strings.EqualFold(name, key) {
			return name
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestD || (d == bestD && best != "" && name < best) {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, with an
// adjacent transposition counted as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
