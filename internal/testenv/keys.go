package testenv

import (
	"context"
	"fmt"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TypeKeys types s into the focused element the way a keyboard does: one
// keyDown carrying the text, then keyUp. chromedp.SendKeys adds a separate
// char event that a real browser never sends after a keydown the page
// cancelled; xterm.js cancels it, so SendKeys would type letters twice.
func TypeKeys(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, r := range s {
			evs := kb.Encode(r)
			down, up := *evs[0], *evs[len(evs)-1]
			if len(evs) == 3 {
				down.Text, down.UnmodifiedText = evs[1].Text, evs[1].UnmodifiedText
			}
			for _, ev := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
					return fmt.Errorf("key %q: %w", r, err)
				}
			}
		}
		return nil
	})
}
