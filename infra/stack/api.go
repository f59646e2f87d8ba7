package stack

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sasflow/sas/shared/submission"
	"github.com/sasflow/sas/shared/topology"
)

// Route is one route of the orders API.
type Route = submission.Route

// Routes lists what the API serves (the handler's own list); every route
// needs IAM authorization.
func Routes() []Route { return submission.Routes() }

// SubmitRoute is the route that takes new orders: the only one whose
// requests become work for the Agents (the handler's Route.Submit).
var SubmitRoute = submission.SubmitRoute()

// apiThrottle is the capacity model's API throttle.
func apiThrottle(c topology.Capacity) *awsapigatewayv2.ThrottleSettings {
	return &awsapigatewayv2.ThrottleSettings{
		RateLimit:  jsii.Number(c.APIRateLimit()),
		BurstLimit: jsii.Number(float64(c.APIBurstLimit())),
	}
}

type orderAPI struct {
	api            awsapigatewayv2.HttpApi
	stage          awsapigatewayv2.HttpStage
	clientPolicy   awsiam.ManagedPolicy
	operatorPolicy awsiam.ManagedPolicy
	// operatorRole is the role operators assume, with operatorPolicy.
	operatorRole awsiam.Role
}

// OperatorPrincipalsParameter is the CloudFormation parameter that lists,
// at deploy time, the IAM roles and users who operate besides those who
// assume the stack's operator role.
const OperatorPrincipalsParameter = "OperatorPrincipalArns"

// OperatorPrincipalsPattern is that parameter's AllowedPattern: empty, or
// IAM role and user ARNs separated by commas (a path and a name of IAM's
// characters; no name with a comma, which the list could not tell from
// the separator), so CloudFormation refuses a mistyped entry at deploy
// time rather than the Submission at its cold start.
const OperatorPrincipalsPattern = `^$|^` + operatorARNPattern + `(,` + operatorARNPattern + `)*$`

const operatorARNPattern = `arn:aws[a-z0-9-]*:iam::[0-9]{12}:(role|user)/([\x21-\x2B\x2D-\x7E]*/)?[A-Za-z0-9_+=.@-]{1,64}`

// AccessLogGroupName is the HTTP API stage's access log group of the stack
// named stackName.
func AccessLogGroupName(stackName string) string {
	return "/aws/vendedlogs/apigateway/" + stackName + "-OrdersApi-access"
}

// accessLogFormat is one JSON line per request: enough to trace a request to
// the Submission function's logs, and no request body or identity secrets.
func accessLogFormat() string {
	fields := map[string]string{
		"requestId":        "$context.requestId",
		"ip":               "$context.identity.sourceIp",
		"caller":           "$context.identity.caller",
		"requestTime":      "$context.requestTime",
		"routeKey":         "$context.routeKey",
		"status":           "$context.status",
		"responseLength":   "$context.responseLength",
		"integrationError": "$context.integrationErrorMessage",
		"latencyMs":        "$context.responseLatency",
	}
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (b *builder) api(handler *fn) *orderAPI {
	api := awsapigatewayv2.NewHttpApi(b.stack, jsii.String("OrdersApi"), &awsapigatewayv2.HttpApiProps{
		// Named after its stack, so each stage's API is told apart in the
		// console.
		ApiName:     jsii.String(*b.stack.StackName() + "-OrdersApi"),
		Description: jsii.String("Clients submit, list and read their own orders; operators list and read every order, retry and cancel them"),
		// The default stage has no access logs; ours below does.
		CreateDefaultStage: jsii.Bool(false),
		DefaultAuthorizer:  awsapigatewayv2authorizers.NewHttpIamAuthorizer(),
	})
	integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("SubmissionIntegration"), handler.fn, nil)
	submit := addRoutes(api, integration)
	stage := b.apiStage(api, submit)
	defaultRoute(b.stack, api, integration)

	// Clients and operators are IAM principals: attaching a policy is all
	// they need. A client's routes see only the caller's own orders (the
	// handler checks the owner); the operator routes see every caller's,
	// and the handler serves them to operators only.
	client := b.routePolicy(api, "OrderClientPolicy", "Lets a client submit orders, and list and read its own, through the orders API; denies the operator routes", submission.ClientPolicy())
	operator := b.routePolicy(api, "OrderOperatorPolicy", "Lets an operator do what a client does, list and read every client's orders, and retry or cancel them through the orders API", submission.OperatorPolicy())
	// The operators: whoever assumes this role. Its trust names the
	// deploying account, so IAM lets a principal of the account assume it
	// only if that principal's own policies allow sts:AssumeRole on it: an
	// account admin grants that to whoever operates.
	role := awsiam.NewRole(b.stack, jsii.String("OrderOperatorRole"), &awsiam.RoleProps{
		AssumedBy:       awsiam.NewAccountRootPrincipal(),
		Description:     jsii.String("Operators assume it to list, read, retry and cancel every client's orders through the orders API (sasctl)"),
		ManagedPolicies: &[]awsiam.IManagedPolicy{operator},
	})
	return &orderAPI{api: api, stage: stage, clientPolicy: client, operatorPolicy: operator, operatorRole: role}
}

// addRoutes declares the route table's routes (Routes) on api, all served
// by integration, and returns SubmitRoute's, which the stage throttles by
// its route key.
func addRoutes(api awsapigatewayv2.HttpApi, integration awsapigatewayv2.HttpRouteIntegration) awsapigatewayv2.HttpRoute {
	var submit awsapigatewayv2.HttpRoute
	for _, r := range Routes() {
		added := api.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integration,
		})
		if r == SubmitRoute {
			submit = (*added)[0]
		}
	}
	if submit == nil {
		panic("the orders API has no route " + SubmitRoute.Method + " " + SubmitRoute.Path)
	}
	return submit
}

// apiStage declares the API's one stage ($default), with its access logs
// and its throttles: the stage's default for every route, and the capacity
// model's on submit.
func (b *builder) apiStage(api awsapigatewayv2.HttpApi, submit awsapigatewayv2.HttpRoute) awsapigatewayv2.HttpStage {
	// Named under /aws/vendedlogs/: API Gateway delivers access logs as a
	// vended log source, and CloudWatch Logs then needs no statement in the
	// account's log resource policy (which has a size cap) for this group.
	logs := awslogs.NewLogGroup(b.stack, jsii.String("OrdersApiAccessLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String(AccessLogGroupName(*b.stack.StackName())),
		Retention:     b.cfg.logRetention(),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	stage := awsapigatewayv2.NewHttpStage(b.stack, jsii.String("OrdersApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		// The stage's default route throttle, for every route but
		// SubmitRoute (below): reads and the operator routes. They reach
		// no Agent, so the model's capacity does not bound them; their
		// throttle, like the orders', only keeps a flood from costing a
		// Lambda invocation a request. So they get the same figures as
		// SubmitRoute, never fewer: a client may follow its orders as
		// fast as it may submit them.
		Throttle: apiThrottle(b.cfg.Capacity),
	})
	// Set on the L1 stage: HTTP APIs write access logs with their service
	// role, so only the destination and the format are needed.
	cfn := stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	// The capacity model's throttle on the one route that feeds the
	// Agents, as a route setting of its own: an HTTP API stage throttles a
	// route by its route key (RouteSettings), overriding the stage's
	// default there. The model's rate is the Agents' capacity with
	// headroom (topology.APIHeadroom), so the admission check (429 with
	// Retry-After, from the queues' depths) sheds what the Agents cannot
	// take, and the throttle only stops a flood before it costs Lambda
	// invocations; its burst is the backlog the queues take in AdmitWait.
	// Orders keep their own bucket, so a flood of reads cannot throttle
	// them.
	throttle := apiThrottle(b.cfg.Capacity)
	cfn.SetRouteSettings(map[string]any{
		SubmitRoute.Method + " " + SubmitRoute.Path: map[string]any{
			"ThrottlingRateLimit":  throttle.RateLimit,
			"ThrottlingBurstLimit": throttle.BurstLimit,
		},
	})
	// API Gateway refuses route settings for a route key the API does not
	// have yet: the stage is created after the route.
	stage.Node().AddDependency(submit)
	cfn.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: logs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat()),
	})
	return stage
}

// defaultRoute declares the catch-all route.
func defaultRoute(scope constructs.Construct, api awsapigatewayv2.HttpApi, integration awsapigatewayv2.HttpRouteIntegration) {
	// The catch-all: a request no route matches (another method, another
	// path) reaches the handler, IAM-authorized like every route, for its
	// 404 or its 405 with Allow instead of API Gateway's bare 404. API
	// Gateway selects it only when no route matches ("The $default route
	// catches requests that don't explicitly match other routes in your
	// API", Create routes for HTTP APIs in API Gateway,
	// https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-routes.html).
	awsapigatewayv2.NewHttpRoute(scope, jsii.String("OrdersApiDefaultRoute"), &awsapigatewayv2.HttpRouteProps{
		HttpApi:     api,
		RouteKey:    awsapigatewayv2.HttpRouteKey_DEFAULT(),
		Integration: integration,
		Authorizer:  awsapigatewayv2authorizers.NewHttpIamAuthorizer(),
	})
}

// operatorPrincipals is the Submission's OPERATOR_PRINCIPALS: the operator
// role's ARN, and those the OperatorPrincipalArns parameter lists (an empty
// parameter leaves an empty entry, which the Submission ignores).
func (b *builder) operatorPrincipals(role awsiam.Role) *string {
	param := awscdk.NewCfnParameter(b.stack, jsii.String(OperatorPrincipalsParameter), &awscdk.CfnParameterProps{
		Type:                  jsii.String("String"),
		Default:               jsii.String(""),
		AllowedPattern:        jsii.String(OperatorPrincipalsPattern),
		ConstraintDescription: jsii.String("empty, or IAM role and user ARNs (arn:aws:iam::111122223333:role/NAME or user/NAME) separated by commas, without spaces"),
		Description: jsii.String("IAM roles and users who operate besides the sessions of OrderOperatorRole, comma-separated ARNs; " +
			"each also needs OrderOperatorPolicy attached. Empty: only OrderOperatorRole."),
	})
	return awscdk.Fn_Join(jsii.String(","), &[]*string{role.RoleArn(), param.ValueAsString()})
}

// routePolicy is a managed policy on execute-api:Invoke over the $default
// stage: policy's Allow, and its Deny, which wins over any allow.
func (b *builder) routePolicy(api awsapigatewayv2.HttpApi, id, description string, policy submission.Policy) awsiam.ManagedPolicy {
	arns := func(patterns []string) *[]*string {
		out := make([]*string, 0, len(patterns))
		for _, p := range patterns {
			method, path, _ := strings.Cut(p, "/")
			out = append(out, api.ArnForExecuteApi(jsii.String(method), jsii.String("/"+path), jsii.String("$default")))
		}
		return &out
	}
	statements := []awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("execute-api:Invoke"),
		Resources: arns(policy.Allow),
	})}
	if len(policy.Deny) > 0 {
		statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Effect:    awsiam.Effect_DENY,
			Actions:   jsii.Strings("execute-api:Invoke"),
			Resources: arns(policy.Deny),
		}))
	}
	managed := awsiam.NewManagedPolicy(b.stack, jsii.String(id), &awsiam.ManagedPolicyProps{
		Description: jsii.String(description),
		Statements:  &statements,
	})
	// One suppression per wildcard resource allowed, naming that resource
	// only (a denied one widens nothing).
	var suppressions []*cdknag.NagPackSuppression
	for _, p := range policy.Allow {
		if !strings.Contains(p, "*") {
			continue
		}
		reason := p + " is a route that takes any order ID, and execute-api can express a path parameter only as a wildcard; " +
			"the statement still names the one API, stage, method and route."
		if p == "*/*" {
			reason = "The catch-all ($default) route: IAM authorizes a request only it matches against the request's own method and path, " +
				"so the handler's 404 and 405 are reached only with every method and path of the stage allowed. The operator routes are " +
				"denied in the client policy and served by the handler to operators only; the statement names the one API and stage."
		}
		suppressions = append(suppressions, &cdknag.NagPackSuppression{
			Id:     jsii.String("AwsSolutions-IAM5"),
			Reason: jsii.String(reason),
			AppliesTo: &[]any{cdknag.RegexAppliesTo{Regex: jsii.String(
				`/^Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:<OrdersApi[0-9A-F]{8}>` +
					jsRegexQuote("/$default/"+p) + `$/g`)}},
		})
	}
	if len(suppressions) > 0 {
		cdknag.NagSuppressions_AddResourceSuppressions(managed, &suppressions, jsii.Bool(false))
	}
	return managed
}

// jsRegexQuote escapes s for a JavaScript regular expression literal, where
// "/" ends the literal.
func jsRegexQuote(s string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(s), "/", `\/`)
}
