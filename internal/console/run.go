package console

import (
	"cmp"
	"context"
	"fmt"

	"github.com/sasflow/sas/internal/opsclient"
)

// Run serves the console of `sasctl ui` for s until ctx ends, printing the
// URL to open: opsclient.Env.UI.
func Run(ctx context.Context, s opsclient.UISession) error {
	o := Options{Orders: s.Client, Endpoint: s.Endpoint, Now: s.Now, Log: s.Log, IdleTimeout: s.IdleTimeout}
	if s.SQS != nil {
		o.Queues, o.Scope = SQSQueues{Client: s.SQS, Scope: s.Scope}, s.ScopeName
	}
	return Serve(ctx, s.Listen, o, func(url string) {
		fmt.Fprintf(s.Out, "sasctl ui: open %s\n(its token opens one session, once: keep it to yourself. The session ends after %s without a request; then, or for another browser, restart sasctl ui for a new URL. Ctrl-C stops the console.)\n",
			url, opsclient.Duration(cmp.Or(s.IdleTimeout, opsclient.DefaultIdleTimeout)))
	})
}
