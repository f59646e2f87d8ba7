// Package ownerstamp stamps the orders of IAM users and roles written before
// owners' unique IDs were recorded with the unique ID of the principal that
// made them (sasctl owners stamp). The Submission matches an owner on its
// unique ID (workflow.OwnerKey), so until then no client reads such an
// order: its owner is an ARN alone, and an ARN is the name any principal
// created under it later would have too.
//
// The ID comes from IAM, which has the user or role that holds the name now
// (GetUser, GetRole: their UserId, RoleId and CreateDate). That principal
// made an order only if it existed when the order was made: a name is held
// by one principal at a time, so an order made before its creation was its
// predecessor's, deleted since, and is left unstamped, no client's. IAM has
// no local engine, so the tests look it up through the Directory port with a
// function-type fake; the stamp itself runs against DynamoDB Local.
package ownerstamp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/sasflow/sas/shared/statestore"
	"github.com/sasflow/sas/shared/submission"
)

// Kind is the kind of principal an owner is.
type Kind string

// The kinds of owners that have a unique ID in IAM.
const (
	User Kind = "user"
	Role Kind = "role"
)

// Owner is an owner of orders that has a unique ID in IAM: an IAM user, or
// a role, every session of which is the role.
type Owner struct {
	// ARN is the owner as the orders name it: the user's ARN, or the
	// role's arn:PARTITION:sts::ACCOUNT:assumed-role/NAME.
	ARN                      string
	Kind                     Kind
	Partition, Account, Name string
}

// ParseOwner reads an owner as the Submission records it
// (submission.Principal): an IAM user, arn:PARTITION:iam::ACCOUNT:user/PATH/NAME,
// or a role, arn:PARTITION:sts::ACCOUNT:assumed-role/NAME. Any other owner
// (the root user, a federated user, a Cognito identity) is unique by itself
// and has nothing to stamp: false.
func ParseOwner(owner string) (Owner, bool) {
	parts := strings.SplitN(owner, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || !partition(parts[1]) || parts[3] != "" || !account(parts[4]) {
		return Owner{}, false
	}
	o := Owner{ARN: owner, Partition: parts[1], Account: parts[4]}
	switch service, resource := parts[2], parts[5]; {
	case service == "iam" && strings.HasPrefix(resource, "user/"):
		o.Kind, o.Name = User, resource[strings.LastIndexByte(resource, '/')+1:]
	case service == "sts" && strings.HasPrefix(resource, "assumed-role/") && strings.Count(resource, "/") == 1:
		o.Kind, o.Name = Role, strings.TrimPrefix(resource, "assumed-role/")
	default:
		return Owner{}, false
	}
	if o.Name == "" {
		return Owner{}, false
	}
	return o, true
}

// partition is a partition's name: aws, aws-cn, aws-us-gov, ...
func partition(s string) bool {
	return s != "" && len(s) <= 32 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// account is an account's ID: 12 digits.
func account(s string) bool { return len(s) == 12 && strings.Trim(s, "0123456789") == "" }

// is reports whether arn, a user's or role's ARN as IAM answers it
// (arn:PARTITION:iam::ACCOUNT:user/PATH/NAME, .../role/PATH/NAME), names
// the owner's principal: the same partition, account, kind and name, in any
// path (a user's path can change; its name is unique in its account).
func (o Owner) is(arn string) bool {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] != o.Partition || parts[2] != "iam" || parts[4] != o.Account {
		return false
	}
	kind, rest, ok := strings.Cut(parts[5], "/")
	return ok && Kind(kind) == o.Kind && rest[strings.LastIndexByte(rest, '/')+1:] == o.Name
}

// prefix is the prefix of the unique ID of the owner's kind.
func (o Owner) prefix() string {
	if o.Kind == Role {
		return submission.RolePrefix
	}
	return submission.UserPrefix
}

// Principal is the user or role that holds an owner's name in IAM now.
type Principal struct {
	// ID is its unique ID (UserId, RoleId), ARN its ARN as IAM gives it.
	ID, ARN string
	// Created is when it was created (CreateDate).
	Created time.Time
}

// ErrNoSuchPrincipal is wrapped by a Directory's Lookup when IAM has no user
// or role of the owner's name.
var ErrNoSuchPrincipal = errors.New("no IAM user or role of that name")

// Directory is the port to IAM: who holds an owner's name now.
type Directory interface {
	Lookup(ctx context.Context, o Owner) (Principal, error)
}

// IAMClient is the part of IAM's API that IAM calls.
type IAMClient interface {
	GetUser(ctx context.Context, in *iam.GetUserInput, opts ...func(*iam.Options)) (*iam.GetUserOutput, error)
	GetRole(ctx context.Context, in *iam.GetRoleInput, opts ...func(*iam.Options)) (*iam.GetRoleOutput, error)
}

var _ IAMClient = (*iam.Client)(nil)

// IAM is the Directory of IAM's API: GetUser for a user, GetRole for a
// role, by name, in the account of the credentials it calls with
// (https://docs.aws.amazon.com/IAM/latest/APIReference/API_GetUser.html,
// https://docs.aws.amazon.com/IAM/latest/APIReference/API_GetRole.html).
// NoSuchEntity is ErrNoSuchPrincipal.
type IAM struct{ Client IAMClient }

var _ Directory = IAM{}

// Lookup asks IAM for the owner's user or role.
func (d IAM) Lookup(ctx context.Context, o Owner) (Principal, error) {
	if o.Name == "" {
		// GetUser without a name answers the caller itself.
		return Principal{}, fmt.Errorf("look up %s: no name", o.ARN)
	}
	var (
		id, arn *string
		created *time.Time
		err     error
	)
	switch o.Kind {
	case User:
		var out *iam.GetUserOutput
		if out, err = d.Client.GetUser(ctx, &iam.GetUserInput{UserName: aws.String(o.Name)}); err == nil && out.User != nil {
			id, arn, created = out.User.UserId, out.User.Arn, out.User.CreateDate
		}
	case Role:
		var out *iam.GetRoleOutput
		if out, err = d.Client.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(o.Name)}); err == nil && out.Role != nil {
			id, arn, created = out.Role.RoleId, out.Role.Arn, out.Role.CreateDate
		}
	default:
		return Principal{}, fmt.Errorf("look up %s: no user or role", o.ARN)
	}
	var missing *types.NoSuchEntityException
	switch {
	case errors.As(err, &missing):
		return Principal{}, fmt.Errorf("look up %s %s: %w", o.Kind, o.Name, ErrNoSuchPrincipal)
	case err != nil:
		return Principal{}, fmt.Errorf("look up %s %s: %w", o.Kind, o.Name, err)
	}
	return Principal{ID: aws.ToString(id), ARN: aws.ToString(arn), Created: aws.ToTime(created)}, nil
}

// Store is what Run asks of the tables (statestore.Stamper).
type Store interface {
	ScanUnstamped(ctx context.Context, each func(statestore.Unstamped) error) error
	StampOwner(ctx context.Context, o statestore.Unstamped, id string) (statestore.Stamp, error)
}

var _ Store = (*statestore.Stamper)(nil)

// OwnerReport is what became of one owner's unstamped orders.
type OwnerReport struct {
	Owner string `json:"owner"`
	// ID and Created are the unique ID and creation time of the principal
	// that holds the owner's name now; absent when none does.
	ID      string    `json:"ownerId,omitempty"`
	Created time.Time `json:"principalCreated,omitzero"`
	// Orders counts the owner's unstamped orders found, Stamped those
	// stamped (in a dry run, those that would be), Predecessors those made
	// before the principal was created: a deleted principal's, left
	// unstamped.
	Orders       int `json:"orders"`
	Stamped      int `json:"stamped"`
	Predecessors int `json:"predecessors"`
	// KeysCopied counts the Idempotency-Keys that now name their order
	// under the ID too; KeysTaken those the principal used anew since its
	// orders are matched on its ID, which keep naming the new order.
	KeysCopied int `json:"keysCopied"`
	KeysTaken  int `json:"keysTaken"`
	// Left says why none of the owner's orders was stamped; "" when they
	// were looked at one by one.
	Left string `json:"left,omitempty"`
}

// Report is what Run did.
type Report struct {
	DryRun bool          `json:"dryRun"`
	Owners []OwnerReport `json:"owners"`
	// Unique counts the orders without an ID whose owner is unique by
	// itself (the root user, a federated user, a Cognito identity), or is
	// no owner Submission records: nothing to stamp.
	Unique int `json:"unique"`
}

// Stamped counts the orders stamped, of every owner.
func (r Report) Stamped() int {
	n := 0
	for _, o := range r.Owners {
		n += o.Stamped
	}
	return n
}

// Run stamps every unstamped order of an IAM user or role with the unique
// ID of the principal that holds its owner's name in IAM now (dir), when
// that principal existed when the order was made; with dryRun, it looks
// them up and counts without writing. It looks each owner up once. An
// owner IAM has no user or role for, or answers for with another
// principal's ARN (another account's: IAM answers for the account of the
// credentials), or with an ID the Submission would refuse, is left, with
// why. A failure of IAM or of the tables stops it: running it again takes
// up where it stopped, as a stamped order is no longer found.
func Run(ctx context.Context, store Store, dir Directory, dryRun bool) (Report, error) {
	r := Report{DryRun: dryRun}
	owners := map[string]*ownerState{}
	err := store.ScanUnstamped(ctx, func(u statestore.Unstamped) error {
		o, ok := ParseOwner(u.Owner)
		if !ok {
			r.Unique++
			return nil
		}
		st := owners[o.ARN]
		if st == nil {
			var err error
			if st, err = lookUp(ctx, dir, o); err != nil {
				return err
			}
			owners[o.ARN] = st
		}
		st.report.Orders++
		switch {
		case st.report.Left != "":
			return nil
		case !u.CreatedAt.After(st.report.Created):
			st.report.Predecessors++
			return nil
		case dryRun:
			st.report.Stamped++
			return nil
		}
		done, err := store.StampOwner(ctx, u, st.report.ID)
		if err != nil {
			return err
		}
		st.report.Stamped++
		switch done.Key {
		case statestore.KeyCopied:
			st.report.KeysCopied++
		case statestore.KeyTaken:
			st.report.KeysTaken++
		}
		return nil
	})
	for _, st := range owners {
		r.Owners = append(r.Owners, st.report)
	}
	slices.SortFunc(r.Owners, func(a, b OwnerReport) int { return strings.Compare(a.Owner, b.Owner) })
	return r, err
}

type ownerState struct{ report OwnerReport }

// lookUp asks dir who holds o's name, and checks the answer.
func lookUp(ctx context.Context, dir Directory, o Owner) (*ownerState, error) {
	st := &ownerState{report: OwnerReport{Owner: o.ARN}}
	p, err := dir.Lookup(ctx, o)
	switch {
	case errors.Is(err, ErrNoSuchPrincipal):
		st.report.Left = fmt.Sprintf("IAM has no %s %s: its orders stay unstamped, no client's", o.Kind, o.Name)
		return st, nil
	case err != nil:
		return nil, err
	case !o.is(p.ARN):
		st.report.Left = fmt.Sprintf("IAM answered for %s, not this owner: the credentials are another account's?", p.ARN)
	case !submission.ValidUniqueID(p.ID, o.prefix()):
		st.report.Left = fmt.Sprintf("IAM answered the ID %q, not a %s's unique ID (%s…)", p.ID, o.Kind, o.prefix())
	case p.Created.IsZero():
		st.report.Left = "IAM answered no creation date: who made the orders cannot be told"
	default:
		st.report.ID, st.report.Created = p.ID, p.Created
	}
	return st, nil
}
