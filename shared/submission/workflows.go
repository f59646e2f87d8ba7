package submission

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sasflow/sas/shared/api"
	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/workflow"
)

// MaxOpenScan bounds the index entries one GET /ops/workflows reads (and
// so the records it reads, in BatchGetItem calls of 100): about 5,000 read
// units and a second or two at most. Past it the answer says truncated.
const MaxOpenScan = 10_000

// listWorkflows answers the operators' GET /ops/workflows: every deployed
// workflow version and every version open orders are pinned to, with how
// many open orders each has. It takes no parameters; any is refused, as
// the listings refuse unknown ones.
func (h *Handler) listWorkflows(ctx context.Context, log *slog.Logger, req events.APIGatewayV2HTTPRequest, _ args) events.APIGatewayV2HTTPResponse {
	values, err := queryValues(req.RawQueryString, req.QueryStringParameters)
	if err != nil {
		return h.reject(ctx, log, req, queryProblem(&QueryError{Errors: []FieldError{{Detail: "the query string is not well-formed: " + err.Error()}}}), nil)
	}
	var errs faults
	for _, k := range slices.Sorted(maps.Keys(values)) {
		errs.add(k, "is not a parameter of this resource, which takes none")
	}
	if len(errs) > 0 {
		return h.reject(ctx, log, req, queryProblem(&QueryError{Errors: errs}), nil)
	}
	count, err := h.store.CountOpen(ctx, MaxOpenScan)
	if err != nil {
		return h.internal(ctx, log, req, fmt.Errorf("count open orders per workflow version: %w", err))
	}
	body := workflowsBody(h.cfg.Workflows, count)
	stranded := 0
	for _, v := range body.Workflows {
		if !v.Deployed {
			stranded += v.InFlight + v.NeedsOperator
		}
	}
	log.InfoContext(ctx, "workflow versions counted", slog.Int("versions", len(body.Workflows)),
		slog.Int("stranded", stranded), slog.Bool("truncated", count.Truncated))
	return respond(http.StatusOK, contentTypeJSON, body, nil)
}

// workflowsBody lists the catalog's versions and the versions count found
// on open orders, by workflow name and version.
func workflowsBody(cat workflow.Catalog, count statestore.OpenCount) api.Workflows {
	body := api.Workflows{Default: cat.Default, Workflows: []api.WorkflowVersion{}, Truncated: count.Truncated}
	seen := map[string]bool{}
	add := func(id string, deployed bool) {
		if seen[id] {
			return
		}
		seen[id] = true
		v := api.WorkflowVersion{ID: id, Deployed: deployed}
		if name, version, ok := workflow.SplitID(id); ok {
			v.Name, v.Version = name, version
			v.Current = deployed && cat.CurrentID(name) == id
		}
		c := count.Versions[id]
		v.InFlight, v.NeedsOperator = c.InFlight, c.NeedsOperator
		v.CanRemove = deployed && !v.Current && c == (statestore.VersionCount{}) && !count.Truncated
		body.Workflows = append(body.Workflows, v)
	}
	for _, id := range cat.IDs() {
		add(id, true)
	}
	for _, id := range slices.Sorted(maps.Keys(count.Versions)) {
		add(id, false)
	}
	slices.SortFunc(body.Workflows, func(a, b api.WorkflowVersion) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version), cmp.Compare(a.ID, b.ID))
	})
	return body
}
