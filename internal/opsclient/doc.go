// Package opsclient is the operators' client of the system's HTTP API and the
// commands of the sasctl CLI built on it (cmd/sasctl):
//
//	sasctl list --state Error [--limit N] [--cursor C] [--all]
//	    one page of the orders in a listed state (Error, Compensated,
//	    CompensationFailed, Cancelled), the newest entry into it first, and
//	    the command that prints the next page; --all follows every page.
//	sasctl show ORDER_ID [--width N]
//	    an order's state, current step, attempts, errors and per-step
//	    history, compensation included, and its timeline (Timeline): each
//	    step's attempts and undo on one time axis.
//	sasctl retry ORDER_ID
//	    resubmits an order in Error from its failed step, or one in
//	    CompensationFailed from its failed compensation.
//	sasctl cancel ORDER_ID
//	    compensates an order that is still in flight.
//	sasctl workflows
//	    every workflow version the deployment runs, and every other one
//	    open orders are pinned to, with its open orders (in flight, and
//	    waiting for an operator) and whether it can leave the catalog
//	    (GET /ops/workflows): "can be removed", "keep: N open", or
//	    "NOT DEPLOYED: N open orders stranded".
//	sasctl dlq list|redrive|tasks [--stage S | --prefix P] [--queue Q]
//	    the dead-letter queues, read and redriven through SQS directly with
//	    the operator's credentials (package dlq): list peeks without
//	    consuming and decodes; redrive starts a message move task, or
//	    copies where the endpoint has none; tasks shows the move tasks.
//	sasctl owners stamp --orders-table T --state-table S [--dry-run]
//	    once, after the upgrade that records owners' unique IDs: gives each
//	    older order of an IAM user or role the unique ID of the principal
//	    that made it, looked up in IAM, through DynamoDB and IAM directly
//	    (package ownerstamp).
//	sasctl ui [--listen 127.0.0.1:PORT] [--stage S | --prefix P | --no-dlq]
//	    the same commands as a web console on this machine (package
//	    console, wired in by cmd/sasctl through Env.UI).
//	sasctl version
//	    the module version the binary was built from.
//
// Global flags: --endpoint-url (else $SAS_API_URL, else $AWS_ENDPOINT_URL),
// --region, --no-sign and --json (the API's own JSON instead of tables).
//
// Every route of the API requires AWS_IAM authorization, so requests are
// signed with SigV4 for the execute-api service using the standard
// credential chain. list, show and workflows use the operators' routes
// (GET /ops/orders, GET /ops/orders/{id}, GET /ops/workflows), which see
// every caller's orders;
// a client's GET /orders sees only its own. The local stack authorizes the
// same way but verifies no signature: to a loopback endpoint requests go over
// plain http, signed with the chain's credentials or, when it has none, as
// the access key local-operator, the local stack's one operator.
//
// Exit codes: 0 success, 1 API or network error, 2 usage error, 3 conflict
// (409: the order's state does not allow the action, or another operator got
// there first), 4 no such order.
package opsclient
