package stepgen

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/sasflow/sas/shared/topology"
)

// What a manifest may grant. The stack grants a code step's role the
// statements of its step.json as they are written (infra/stack,
// codestep.go) and takes from here the cdk-nag findings it suppresses
// (Statement.NagFindings) and the pattern of the parameters a resource
// names (ParameterPattern), so this file is the one place that decides what
// a step may be given. Every rule is an allow-list of forms: what a form
// does not admit is refused, with every problem at once.

// BootstrapQualifier is the qualifier of the CDK's bootstrap stack the app
// deploys through (the default one, which cdk.json keeps): every resource
// `cdk bootstrap` creates is named with it, cdk-<qualifier>-assets-... the
// bucket that holds the functions' code among them ("Resource IDs created
// during bootstrapping", AWS CDK v2 Developer Guide,
// https://docs.aws.amazon.com/cdk/v2/guide/bootstrapping-env.html). A test
// of infra/stack holds it to the CDK's DEFAULT_QUALIFIER.
const BootstrapQualifier = "hnb659fds"

// marks are what every name the stack and its deployment give a resource
// holds: the stack names its queues, API and access log group after
// itself, CloudFormation names the rest <stack name>-<logical ID>-<random>
// ("CloudFormation resource custom naming",
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-name.html),
// and the bootstrap names its resources with its qualifier. A name longer
// than its service allows keeps the stack name's first 25 characters where
// the limit is 63 or 64 (the shortest of the stack's: IAM roles, Lambda
// functions); CloudFormation does not document how it shortens, but names
// it made show it, and StackNamePrefix has 24.
var marks = []string{topology.StackNamePrefix, BootstrapQualifier}

// stackResource is a kind of resource the stack or its deployment holds,
// as IAM sees it: the ARN's service, and its resource part up to the name.
// A name the stack gives starts with mark; where AWS gives an ID instead
// (mark ""), the ID can be anything, so no resource after lead can be told
// from the stack's.
type stackResource struct {
	service, lead, mark, what string
}

var stackResources = []stackResource{
	{"dynamodb", "table/", topology.StackNamePrefix, "the state, orders and ledger tables, their indexes and streams"},
	{"sqs", "", topology.StackNamePrefix, "the work and response queues and their dead-letter queues"},
	{"sns", "", topology.StackNamePrefix, "the alert and order-events topics"},
	{"lambda", "function:", topology.StackNamePrefix, "the functions"},
	{"lambda", "event-source-mapping:", "", "the functions' event source mappings"},
	{"iam", "role/", topology.StackNamePrefix, "the functions' and the operators' roles"},
	{"iam", "policy/", topology.StackNamePrefix, "the operators' and clients' policies"},
	{"logs", "log-group:", topology.StackNamePrefix, "the functions' log groups"},
	{"logs", "log-group:/aws/vendedlogs/apigateway/", topology.StackNamePrefix, "the API's access log"},
	{"events", "rule/", topology.StackNamePrefix, "the Supervisor's schedule"},
	{"cloudwatch", "alarm:", topology.StackNamePrefix, "the alarms"},
	{"cloudwatch", "dashboard/", "", "the dashboard"},
	{"kms", "key/", "", "the topics' keys"},
	{"execute-api", "", "", "the API"},
	{"apigateway", "/apis/", "", "the API"},
	{"s3", "cdk-", BootstrapQualifier, "the CDK bootstrap's bucket of the functions' code"},
	{"iam", "role/cdk-", BootstrapQualifier, "the CDK bootstrap's deploy roles"},
	{"ssm", "parameter/cdk-bootstrap/", BootstrapQualifier, "the CDK bootstrap's version"},
	{"ecr", "repository/cdk-", BootstrapQualifier, "the CDK bootstrap's image repository"},
}

// escalation is a family of actions a manifest may not grant: each lets its
// holder act with more than the statement says, by changing what an
// identity may do, by taking another role's credentials, or by running code
// under a role that is not the step's. Most are on Rhino Security Labs'
// list of IAM privilege escalation methods
// (https://github.com/RhinoSecurityLabs/AWS-IAM-Privilege-Escalation).
type escalation struct {
	// action is service:Action, or service:* for every action of the
	// service; IAM reads both case-insensitively ("The prefix and the
	// action name are case insensitive", IAM JSON policy elements: Action,
	// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_action.html).
	action string
	// except are actions of the service a manifest may grant all the same.
	except []string
	why    string
}

var escalations = []escalation{
	// Policies, policy versions, access keys, login profiles, group
	// membership and trust policies (Rhino 1-14), and iam:PassRole, which
	// hands a role to a service that then acts as it ("Grant a user
	// permissions to pass a role to an AWS service",
	// https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html).
	{action: "iam:*", why: "IAM changes what identities may do, and iam:PassRole hands a role to a service that then acts as it"},
	// AssumeRole and its kin return another role's credentials (Rhino
	// 14); a step's own come from Lambda, and no sts action is needed to
	// use them.
	{action: "sts:*", why: "STS returns another role's credentials"},
	// CreateFunction (with PassRole), UpdateFunctionCode,
	// UpdateFunctionConfiguration (a layer), AddPermission and
	// CreateEventSourceMapping run code as a function's role or let
	// others invoke it (Rhino 15-18, 26): a step calls other functions,
	// it never changes them.
	{action: "lambda:*", except: []string{"lambda:InvokeFunction"}, why: "Lambda's other actions create or change functions, which then run as their roles"},
	// The stack's keys are known by IDs AWS gives them, so a statement on
	// a key cannot be told from one on the stack's; a step that reads data
	// under a customer managed key is named in that key's own policy,
	// which "is the primary way to control access" ("Key policies in AWS
	// KMS", https://docs.aws.amazon.com/kms/latest/developerguide/key-policies.html).
	{action: "kms:*", why: "the stack's own keys are known by IDs no manifest can be told apart from: a key's own policy names the step's role instead"},
	// A stack operation acts with the stack's service role (Rhino 21),
	// and the step's own stack is one.
	{action: "cloudformation:*", why: "CloudFormation acts as a stack's service role, and can change this stack"},
	// Instances run with their instance profile's role: launching one,
	// giving one a profile ("Grant permissions to attach an IAM role to an
	// instance",
	// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/permission-to-pass-iam-roles.html),
	// or running commands and shells on one (Session Manager's
	// ssm:StartSession, "Additional sample IAM policies for Session
	// Manager",
	// https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-restrict-access-examples.html).
	{action: "ec2:RunInstances", why: "an instance runs as its instance profile's role"},
	{action: "ec2:AssociateIamInstanceProfile", why: "it gives an instance a role"},
	{action: "ec2:ReplaceIamInstanceProfileAssociation", why: "it gives an instance a role"},
	{action: "ssm:SendCommand", why: "it runs commands on instances, as their roles"},
	{action: "ssm:StartSession", why: "it opens a shell on instances, as their roles"},
	// Services that run code or templates under a role (Rhino 19-20,
	// 22-25, 27-28).
	{action: "glue:CreateDevEndpoint", why: "a development endpoint runs as the role it is given"},
	{action: "glue:UpdateDevEndpoint", why: "it opens a development endpoint, which runs as its role"},
	{action: "datapipeline:CreatePipeline", why: "a pipeline runs as the role it is given"},
	{action: "datapipeline:PutPipelineDefinition", why: "a pipeline runs as its role"},
	{action: "codestar:CreateProject", why: "a project deploys as the role it is given"},
	{action: "codestar:CreateProjectFromTemplate", why: "a project deploys as a role of its own"},
	{action: "codestar:AssociateTeamMember", why: "it attaches the project's policies to a member"},
	{action: "sagemaker:CreateNotebookInstance", why: "a notebook runs as the role it is given"},
	{action: "sagemaker:CreatePresignedNotebookInstanceUrl", why: "it opens a notebook, which runs as its role"},
}

// escalates tells why action a, service:Action, may grant more than itself,
// or "".
func escalates(a string) string {
	service, _, _ := strings.Cut(a, ":")
	for _, e := range escalations {
		s, name, _ := strings.Cut(e.action, ":")
		if !strings.EqualFold(s, service) || (name != "*" && !strings.EqualFold(e.action, a)) {
			continue
		}
		if slices.ContainsFunc(e.except, func(x string) bool { return strings.EqualFold(x, a) }) {
			continue
		}
		return e.why
	}
	return ""
}

var (
	// A service prefix, as IAM's actions and ARNs write it.
	servicePrefix = regexp.MustCompile(`^[a-z0-9-]+$`)
	// A region's name: us-east-1, us-gov-west-1, ap-southeast-3, ...
	regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	// An account ID is 12 digits.
	accountID = regexp.MustCompile(`^[0-9]{12}$`)
)

// checkResource reports what is wrong with resource r of a statement of m:
// an ARN arn:${AWS::Partition}:service:region:account:resource whose
// service is written out; whose region is empty, ${AWS::Region} or a
// region's name, and account empty, ${AWS::AccountId} or 12 digits; whose
// resource names one resource or a path under one (a * only as the last
// segment of a path of at least one literal segment), each parameter a
// whole name in it; with no ? (IAM's wildcard of one character,
// "IAM JSON policy elements: Resource",
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html),
// and nothing that names, or could match, a resource of the stack's own.
// Unknown references are reported by Validate.
func (m Manifest) checkResource(r string) []string {
	parts := Parts(r)
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, p := range parts {
		if strings.Contains(p.Literal, "?") {
			fail("has ?: IAM reads ? as a wildcard of one character")
			break
		}
	}
	mark := markIn(parts)
	if mark != "" {
		fail("names the stack's own resources: it holds %s, as every name the stack or its deployment gives does", mark)
	}
	fields, ok := arnFields(parts)
	if !ok || !isLiteral(fields[0], "arn") {
		return append(problems, "is not an ARN (arn:${AWS::Partition}:service:region:account:resource)")
	}
	if !isRef(fields[1], Partition) {
		fail("must name its partition as ${%s}, so the stack deploys in every partition", Partition)
	}
	if strings.Contains(text(slices.Concat(fields[2:5]...)), "*") {
		fail("has a wildcard where the service, region or account go")
	}
	service := ""
	if len(fields[2]) == 1 && servicePrefix.MatchString(fields[2][0].Literal) {
		service = fields[2][0].Literal
	} else {
		fail("must write its service out (s3, dynamodb, ...), not %q", text(fields[2]))
	}
	if f := fields[3]; len(f) > 0 && !isRef(f, Region) && (len(f) != 1 || !regionName.MatchString(f[0].Literal)) {
		fail("must name its region as ${%s}, a region's name or nothing, not %q", Region, text(f))
	}
	if f := fields[4]; len(f) > 0 && !isRef(f, AccountID) && (len(f) != 1 || !accountID.MatchString(f[0].Literal)) {
		fail("must name its account as ${%s}, 12 digits or nothing, not %q", AccountID, text(f))
	}
	resource := fields[5]
	if len(resource) == 0 {
		return append(problems, "names no resource")
	}
	for i, p := range resource {
		if p.Ref == "" || p.Ref == Partition || p.Ref == Region || p.Ref == AccountID {
			continue
		}
		// A parameter is a whole name: the stack holds its value to
		// ParameterPattern, which nothing around it could then undo.
		before := i == 0 || strings.HasSuffix(resource[i-1].Literal, "/") || strings.HasSuffix(resource[i-1].Literal, ":")
		after := i == len(resource)-1 || strings.HasPrefix(resource[i+1].Literal, "/") || strings.HasPrefix(resource[i+1].Literal, ":")
		if !before || !after {
			fail("must use ${%s} as a whole name, between / or : or the ends of its resource", p.Ref)
		}
	}
	if err := scoped(resource); err != nil {
		fail("%v", err)
	}
	for _, k := range stackResources {
		if mark == "" && k.service == service && k.reachedBy(resource) {
			fail("could name the stack's own resources: %s (%s:%s...)", k.what, k.service, k.lead)
			break
		}
	}
	return problems
}

// arnFields splits parts at the first five colons of their literal text:
// the ARN's arn, partition, service, region, account and resource.
func arnFields(parts []Part) ([6][]Part, bool) {
	var fields [6][]Part
	i := 0
	for _, p := range parts {
		if p.Ref != "" {
			fields[i] = append(fields[i], p)
			continue
		}
		rest := p.Literal
		for i < 5 {
			before, after, found := strings.Cut(rest, ":")
			if !found {
				break
			}
			if before != "" {
				fields[i] = append(fields[i], Part{Literal: before})
			}
			i++
			rest = after
		}
		if rest != "" {
			fields[i] = append(fields[i], Part{Literal: rest})
		}
	}
	return fields, i == 5
}

// scoped reports why resource, an ARN's resource part, does not name one
// resource or a path under one: a wildcard only in the last segment of a
// path under one resource, after at least one literal segment
// (bucket/shipments/*, never bucket/* or *).
func scoped(resource []Part) error {
	if !strings.Contains(text(resource), "*") {
		return nil
	}
	// References become opaque marks: none may stand for a literal
	// segment, or hold a separator or a wildcard.
	var sb strings.Builder
	for _, p := range resource {
		if p.Ref != "" {
			sb.WriteString("\x01")
		} else {
			sb.WriteString(p.Literal)
		}
	}
	segs := strings.Split(sb.String(), "/")
	if len(segs) < 3 {
		return errors.New("has a wildcard that is not under a path of its own (resource/path/*)")
	}
	for _, s := range segs[:len(segs)-1] {
		if s == "" || strings.Contains(s, "*") {
			return errors.New("has a wildcard or an empty segment before the last segment of its path")
		}
	}
	for _, s := range segs[1 : len(segs)-1] {
		if strings.Contains(s, "\x01") {
			return errors.New("has a path that is not literal before its wildcard")
		}
	}
	return nil
}

// reachedBy tells whether a resource part (literal text, * and references)
// can match a name of kind k. IAM's * matches any text, even across / and
// : (IAM JSON policy elements: Resource); a reference stands for any text
// that holds no mark (a parameter's value is held to ParameterPattern, and
// a pseudo parameter's is a partition, a region or an account). Both are
// followed as a set of positions in k's lead and mark; past the mark any
// text matches.
func (k stackResource) reachedBy(resource []Part) bool {
	lead, mark := []rune(strings.ToLower(k.lead)), []rune(strings.ToLower(k.mark))
	end := len(lead) + len(mark) // past the mark: any text matches
	at := map[int]bool{0: true}
	step := func(c rune) {
		next := map[int]bool{}
		for p := range at {
			switch {
			case p == end:
				next[end] = true
			case p < len(lead) && lead[p] == c, p >= len(lead) && mark[p-len(lead)] == c:
				next[p+1] = true
			}
		}
		at = next
	}
	for _, part := range resource {
		if part.Ref != "" {
			next := map[int]bool{}
			for p := range at {
				next[p] = true
				switch {
				case p == end:
				case p <= len(lead):
					// The rest of the lead and any of the mark but its
					// end; with no mark (an ID), that is the end.
					for q := p; q < end; q++ {
						next[q] = true
					}
					if len(mark) == 0 {
						next[end] = true
					}
				default:
					// Inside the mark, its rest holds no mark by itself.
					for q := p; q <= end; q++ {
						next[q] = true
					}
				}
			}
			at = next
			continue
		}
		for _, c := range strings.ToLower(part.Literal) {
			if c == '*' {
				if len(at) > 0 {
					return true
				}
				continue
			}
			step(c)
		}
	}
	return at[end]
}

// markIn returns the mark the literal text of parts holds, case aside, or
// "".
func markIn(parts []Part) string {
	for _, p := range parts {
		for _, mark := range marks {
			if strings.Contains(strings.ToLower(p.Literal), strings.ToLower(mark)) {
				return mark
			}
		}
	}
	return ""
}

func isLiteral(f []Part, s string) bool { return len(f) == 1 && f[0].Ref == "" && f[0].Literal == s }
func isRef(f []Part, name string) bool  { return len(f) == 1 && f[0].Ref == name }

// text is parts written back as the manifest has them.
func text(parts []Part) string {
	var sb strings.Builder
	for _, p := range parts {
		if p.Ref != "" {
			sb.WriteString("${" + p.Ref + "}")
		} else {
			sb.WriteString(p.Literal)
		}
	}
	return sb.String()
}

// ResourceParameters are the parameters m's statements name resources
// with, sorted: the stack holds their values to ParameterPattern.
func (m Manifest) ResourceParameters() []string {
	var out []string
	for _, s := range m.Statements {
		for _, r := range s.Resources {
			for _, p := range Parts(r) {
				if _, ok := m.Parameters[p.Ref]; ok && !slices.Contains(out, p.Ref) {
					out = append(out, p.Ref)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// ParameterValue reports why v may not be the value of a parameter a
// resource is named with: IAM would read a wildcard (* or ?) or a policy
// variable (${...}) in it, or it names the stack's own resources.
// ParameterPattern says the same to CloudFormation.
func ParameterValue(v string) error {
	if v == "" || strings.ContainsAny(v, "*?$") || strings.ContainsFunc(v, unicode.IsSpace) {
		return fmt.Errorf("%q must be a name without *, ?, $ or spaces", v)
	}
	if mark := markIn([]Part{{Literal: v}}); mark != "" {
		return fmt.Errorf("%q names the stack's own resources (it holds %s)", v, mark)
	}
	return nil
}

// ParameterPattern is the AllowedPattern of a parameter a resource is named
// with: ParameterValue's rule as a Java regular expression, which is what
// CloudFormation's patterns are ("Using regular expressions in
// CloudFormation templates",
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cfn-regexes.html).
// Case is spelled out letter by letter ([Ss]) rather than with a flag, so
// JavaScript reads it alike and infra/stack's test can run it.
func ParameterPattern() string {
	alts := make([]string, len(marks))
	for i, mark := range marks {
		var sb strings.Builder
		for _, c := range mark {
			if unicode.IsLetter(c) {
				sb.WriteString("[" + string(unicode.ToUpper(c)) + string(unicode.ToLower(c)) + "]")
			} else {
				sb.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		alts[i] = sb.String()
	}
	return `^(?!.*(` + strings.Join(alts, "|") + `))[^*?$\s]+$`
}

// WildcardReason is why the stack suppresses cdk-nag's AwsSolutions-IAM5
// findings of a code step's statements (NagFindings).
const WildcardReason = "The step names its objects at run time, under a literal path of one resource that is the step's own: " +
	"stepgen admits a wildcard nowhere else, and none that could match a resource of the stack's."

// NagFindings are the findings cdk-nag's AwsSolutions-IAM5 makes of s's
// wildcards, as its suppressions name them: "Resource::" and the resource,
// each reference written <Name> (how cdk-nag writes a CloudFormation
// reference). The stack suppresses these, and only these, on the step's
// role; a statement Validate accepts has no other wildcard.
func (s Statement) NagFindings() []string {
	var out []string
	for _, r := range s.Resources {
		if !strings.Contains(r, "*") {
			continue
		}
		var sb strings.Builder
		sb.WriteString("Resource::")
		for _, p := range Parts(r) {
			if p.Ref == "" {
				sb.WriteString(p.Literal)
			} else {
				sb.WriteString("<" + p.Ref + ">")
			}
		}
		out = append(out, sb.String())
	}
	return out
}
